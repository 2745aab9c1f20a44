"""The contract suite's cross-host adapter: one ``EventHub`` whose clients are spread over
three hosts of a fleet on the real broker, so that every message a contract test sends
crosses the broker between two hosts.

* host ``send`` holds every sending side: ``publish``, ``post``, ``request``, ``send``
  and the waits on replies (the requester's pending request lives where it was sent);
* host ``boxes`` holds every mailbox (``register_mailbox``, readers, mailbox waits) and
  answers the requests they receive (``reply`` runs where the request was delivered);
* host ``topics`` holds every subscription, topic wait and last-value read of the crews
  whose id sorts in the second half of the alphabet and of ``hub.system``; ``boxes``
  holds those of the others, so a publish reaches subscribers on two hosts at once.

The contract is synchronous where a single host is (``publish`` then ``drain`` sees the
message). Across hosts a publish or post returns at the broker's confirm, before the
receiving host took it; this adapter closes that gap the way a test must, by waiting
(bounded) until every receiving host's gateway handed the message to its hub, observed by
wrapping the hubs' sink methods (``take_posts``, ``take_topic``). Nothing else is
changed: what a test observes is what the hosts' own hubs returned.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import orkeon_actors as ok
from orkeon_actors.fleet.hub import AmqpEventHub
from orkeon_actors.hub.port import CallerContext, EventHub, MailboxLease, MailboxRegistration, Subscription
from orkeon_actors.model.address import MailboxAddress, is_reserved_topic
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.ids import CorrelationId, CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import PublishOptions, WaitDescriptor, WaitOnMailbox, WaitOnReply, WaitTimeout
from orkeon_actors.testing import wait_until

from .broker import require_broker, session_vhost
from .fleet import fleet_keys, start_host

FENCE_SECONDS = 15.0
"""How long a sending call waits for the receiving hosts to take its message."""


class _Arrivals:
    """The message ids a host's gateway handed to its hub (posts kept or refused, topic
    publishes routed), observed by wrapping the hub's sink methods."""

    def __init__(self, hub: AmqpEventHub) -> None:
        self.hub = hub
        self._seen: set[str] = set()
        self._changed = threading.Condition()
        take_posts, take_topic = hub.take_posts, hub.take_topic

        def posts(batch: list[Any]) -> list[BaseException | None]:
            try:
                return take_posts(batch)
            finally:
                self._add(str(envelope.message.id) for envelope, _address, _redelivered in batch)

        def topic(envelope: Any) -> None:
            try:
                take_topic(envelope)
            finally:
                self._add([str(envelope.message.id)])

        hub.take_posts = posts  # type: ignore[method-assign]
        hub.take_topic = topic  # type: ignore[method-assign]

    def _add(self, ids: Any) -> None:
        with self._changed:
            self._seen.update(ids)
            self._changed.notify_all()

    def wait(self, message_id: str) -> None:
        deadline = time.monotonic() + FENCE_SECONDS
        with self._changed:
            while message_id not in self._seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"host {self.hub.host_id} did not take message {message_id} in time")
                self._changed.wait(left)


class SplitHub(EventHub):
    """One hub over the hosts ``send``, ``boxes`` and ``topics`` (module docstring)."""

    def __init__(self, send: AmqpEventHub, boxes: AmqpEventHub, topics: AmqpEventHub) -> None:
        self.send_host, self.boxes, self.topics = send, boxes, topics
        self.hosts = (send, boxes, topics)
        self.receivers = (boxes, topics)
        self.arrivals = {hub.host_id: _Arrivals(hub) for hub in self.receivers}
        self.clock = send.clock
        self.limits = send.limits
        self.quotas = send.quotas

    # -- where each side lives -------------------------------------------------------------

    def _reader_host(self, caller: CallerContext) -> AmqpEventHub:
        crew = str(caller.crew_id)
        return self.topics if caller.is_system or crew[:1] >= "n" else self.boxes

    def _mailbox_host(self, address: MailboxAddress) -> AmqpEventHub:
        for hub in self.receivers:
            if hub.mailbox_registered(address):
                return hub
        return self.boxes

    def _fence(self, message: Message) -> Message:
        """Wait until the hosts that must receive ``message`` took it."""
        if not is_reserved_topic(message.topic):  # a publish: every other host receives it
            for arrivals in self.arrivals.values():
                arrivals.wait(str(message.id))
            return message
        assert message.target_mailbox is not None
        host = self.send_host.where(message.target_mailbox)
        if host in self.arrivals:
            self.arrivals[host].wait(str(message.id))
        return message

    def _announced(self, address: MailboxAddress, rounds_before: int) -> None:
        """Wait for a view of the boxes host taken after ``address`` was registered: two
        more complete presence rounds (one in flight may predate it, say a round that
        still omitted it after a close) that place it there."""
        roster = self.send_host.gateway.roster
        wait_until(
            lambda: (
                roster.rounds_from(self.boxes.host_id) >= rounds_before + 2
                and self.send_host.where(address) == self.boxes.host_id
            ),
            timeout=30,
            what=f"{address} announced to {self.send_host.host_id}",
        )

    # -- mailboxes ------------------------------------------------------------------------

    def register_mailbox(self, address: MailboxAddress | str, owner: object = None) -> MailboxRegistration:
        rounds = self.send_host.gateway.roster.rounds_from(self.boxes.host_id)
        registration = self.boxes.register_mailbox(address, owner)
        self._announced(registration.address, rounds)
        return registration

    def register_mailboxes(self, addresses: Sequence[MailboxAddress | str]) -> list[MailboxRegistration]:
        rounds = self.send_host.gateway.roster.rounds_from(self.boxes.host_id)
        registrations = self.boxes.register_mailboxes(addresses)
        for registration in registrations:
            self._announced(registration.address, rounds)
        return registrations

    def close_mailboxes(self, registrations: Sequence[MailboxRegistration]) -> list[list[Message]]:
        return self.boxes.close_mailboxes(registrations)

    # -- the sending side -----------------------------------------------------------------

    def publish(
        self, caller: CallerContext, topic: str, payload: object, options: PublishOptions, cancel: CancelToken | None
    ) -> Message:
        return self._fence(self.send_host.publish(caller, topic, payload, options, cancel))

    def post(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
        *,
        idempotency_key: str | None = None,
    ) -> Message:
        sent = self.send_host.post(caller, to, payload, metadata, cancel, idempotency_key=idempotency_key)
        return self._fence(sent)

    def request(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        timeout: float,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
        *,
        idempotency_key: str | None = None,
    ) -> Message:
        sent = self.send_host.request(caller, to, payload, timeout, metadata, cancel, idempotency_key=idempotency_key)
        return self._fence(sent)

    def send(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        timeout: float,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
        *,
        idempotency_key: str | None = None,
    ) -> Message:
        return self.send_host.send(caller, to, payload, timeout, metadata, cancel, idempotency_key=idempotency_key)

    # -- the receiving side ---------------------------------------------------------------

    def reply(
        self,
        caller: CallerContext,
        correlation_id: CorrelationId,
        payload: object,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
        *,
        idempotency_key: str | None = None,
    ) -> Message:
        where = next((hub for hub in self.receivers if hub.is_active_correlation(correlation_id)), self.boxes)
        return where.reply(caller, correlation_id, payload, metadata, cancel, idempotency_key=idempotency_key)

    def subscribe(
        self,
        caller: CallerContext,
        pattern: str,
        cancel: CancelToken | None,
        *,
        metadata_match: Any = None,
        max_buffered: int | None = None,
    ) -> Subscription:
        host = self._reader_host(caller)
        return host.subscribe(caller, pattern, cancel, metadata_match=metadata_match, max_buffered=max_buffered)

    def wait_for(
        self, caller: CallerContext, descriptor: WaitDescriptor, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> Message:
        if isinstance(descriptor, WaitOnReply):
            host = self.send_host
        elif isinstance(descriptor, WaitOnMailbox):
            host = self._mailbox_host(MailboxAddress.parse(descriptor.address))
        else:
            host = self._reader_host(caller)
        return host.wait_for(caller, descriptor, timeout, cancel)

    def lease(
        self, caller: CallerContext, address: MailboxAddress, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> MailboxLease:
        return self._mailbox_host(address).lease(caller, address, timeout, cancel)

    def get_last_value(
        self, caller: CallerContext, key: str, crew_scope: CrewId | None, cancel: CancelToken | None
    ) -> Message | None:
        return self._reader_host(caller).get_last_value(caller, key, crew_scope, cancel)

    def is_active_correlation(self, correlation_id: CorrelationId) -> bool:
        """Whether a receiving host can still answer it (the requester's host keeps its
        own pending request until the reply arrives)."""
        return any(hub.is_active_correlation(correlation_id) for hub in self.receivers)

    def pending_waits(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for hub in self.hosts:
            for kind, count in hub.pending_waits().items():
                total[kind] = total.get(kind, 0) + count
        return total

    def stop(self) -> None:
        for hub in self.hosts:
            hub.stop()


class _Schedulers:
    def __init__(self, runtimes: Sequence[ok.Runtime]) -> None:
        self._runtimes = runtimes

    def pending_count(self) -> int:
        return sum(rt.scheduler.pending_count() for rt in self._runtimes)


class SplitRuntime:
    """What the contract tests use of a runtime (``hub``, ``scheduler``, ``stop``) over
    the three host runtimes."""

    def __init__(self, runtimes: Sequence[ok.Runtime]) -> None:
        self.runtimes = list(runtimes)
        hubs = [rt.hub for rt in self.runtimes]
        assert all(isinstance(hub, AmqpEventHub) for hub in hubs)
        self.hub = SplitHub(*hubs)  # type: ignore[arg-type]
        self.scheduler = _Schedulers(self.runtimes)

    def stop(self) -> None:
        for rt in self.runtimes:
            rt.stop()


def split_runtime(tmp: Path, clock: ok.Clock | None) -> SplitRuntime:
    """Three fresh hosts on the session's vhost (one shared clock), as one contract
    adapter. They start side by side: each start is mostly round trips to the broker."""
    require_broker()
    suffix = uuid.uuid4().hex[:8]
    names = [f"{role}-{suffix}" for role in ("send", "boxes", "topics")]
    keys = fleet_keys(names)
    vhost = session_vhost()
    runtimes: list[ok.Runtime] = []
    try:
        with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="split-start") as pool:
            starting = [pool.submit(start_host, vhost, name, tmp / f"{name}.db", keys, clock=clock) for name in names]
            wait(starting)
        runtimes = [future.result() for future in starting if future.exception() is None]
        for future in starting:
            future.result()  # the first start that failed, once the others are kept for the stop below
        hubs = [rt.hub for rt in runtimes]
        wait_until(
            lambda: all({p.host for p in hub.roster()} >= set(names) for hub in hubs),  # type: ignore[attr-defined]
            timeout=30,
            what="the three hosts seeing each other",
        )
    except BaseException:
        for rt in runtimes:
            rt.stop()
        raise
    return SplitRuntime(runtimes)
