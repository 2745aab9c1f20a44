"""The distributed adapter of the EventHub port on RabbitMQ: one host of a fleet.

``AmqpEventHub`` is the SQLite durable hub of this host (its own store: its crews'
mailboxes, snapshots, waits, timers, processed ids) composed with a
:class:`~orkeon_actors.fleet.gateway.Gateway` through the hub core's collaborators, not
by overriding the core: a mailbox store that keeps local mailboxes in SQLite and hands a
post for a mailbox another host announces to the gateway, a last-value store that marks
what is retained, and a route listener that fans every topic publish out to the broker.
Create it with ``Runtime.start(store="host-a.db", broker="amqp://...", host_id="host-a")``.

What crosses hosts (cross-host messaging design §3-§8; spec §17):

* **post / send** to a mailbox no local registration holds but a host announces on the
  roster: published on ``fleet.msg`` keyed by the recipient, signed, mandatory, and the
  call returns once the broker confirmed it. The receiving gateway verifies it, re-checks
  the ACL against the verified sender, keeps it in its own store (a sleeping crew's
  parked mailbox included: the wake path fires as for a local post) and only then
  acknowledges it. A mailbox nobody announces: ``MailboxNotFoundError`` at once.
* **send / reply**: the request carries its ``expires_at`` (the requester's deadline);
  the receiving hub opens the request locally (:meth:`HubCore.expect_reply`), so the
  replier's ``reply`` is checked and staged as for a local request, and the reply travels
  back to the requester's ``answers.<host>`` queue. A request already expired at
  delivery is dead-lettered (its sender is told by the DLQ consumer); the requester's
  own timeout stays authoritative.
* **publish**: routed locally, and published on ``fleet.msg`` keyed ``topic.<topic>``
  (or ``scoped.<crew>.<topic>``); every host's ``topics.<host>`` queue takes them all and
  routes them through its local router, which enforces crew scoping (spec §10.1) before
  any subscriber sees a message. Subscriptions, ``wait_for`` on a topic and the sleeping
  crews' wake triggers thus see events published on any host.
* **last values**: a retained publish carries its ``(scope, key)``; every host that
  receives it keeps it in its own store and memory, unless it holds a newer value. A host
  started after the publish exchanges its values with every live host at boot
  (:mod:`orkeon_actors.fleet.last_value_sync`), the newest of each key winning.

A unit of work's post to a mailbox on another host is committed to the outbox with the
unit's effects and forwarded by the outbox dispatcher once the broker confirms it.

A request delivered here keeps its reply route (requester, host, deadline) in this
host's store until answered (:mod:`orkeon_actors.fleet.remote_requests`): a restart of
this host reopens it, so the restarted agent's reply still reaches the requester.

An agent's post to a mailbox on another host is in its sender's history through a staged
intent (:mod:`orkeon_actors.store.sent_staged`); one left pending by a crash is published
again at boot (:meth:`AmqpEventHub.republish`, same body, sender and recipient) and
completed on the broker's confirm.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

import apsw
from loguru import logger

from orkeon_actors.acl.stage import AclMiddleware
from orkeon_actors.errors import (
    EventHubError,
    HubStoppedError,
    InvalidArgumentError,
    MailboxNotFoundError,
    UnroutableError,
)
from orkeon_actors.fleet import remote_requests, seen_store
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.fleet.gateway import Gateway, check_crossable, now_ms
from orkeon_actors.fleet.last_value_sync import newer
from orkeon_actors.fleet.remote_requests import RemoteRequest
from orkeon_actors.fleet.roster import Presence
from orkeon_actors.hub.amqp.link import Outgoing
from orkeon_actors.hub.amqp.topology import answer_key, mailbox_key, scoped_topic_key, topic_key
from orkeon_actors.hub.confirmation import delivery_confirmation_requested
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.hub.memory import LastValueStore
from orkeon_actors.hub.replies import PendingRequest
from orkeon_actors.hub.scheduler import Scheduler
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.middleware.pipeline import Pipeline
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.store import last_values
from orkeon_actors.store.config import StoreConfig
from orkeon_actors.store.durable_hub import SqliteEventHub
from orkeon_actors.store.mailbox_store import SqliteMailboxStore
from orkeon_actors.wire.amqp import Envelope

if TYPE_CHECKING:
    from orkeon_actors.fleet.cancels import RemoteCancels

__all__ = ["AmqpEventHub"]

_log = logger.bind(component="orkeon_actors.fleet")


def _crossable(address: MailboxAddress) -> bool:
    """Whether a mailbox this store keeps can have an inbox (parked and sleeping ones
    too: their posts land here); one that cannot stays local, with an ERROR."""
    try:
        check_crossable(address)
    except InvalidArgumentError as exc:
        _log.error("{}: it stays reachable from this host only", exc)
        return False
    return True


class _FleetMailboxes:
    """The hub core's mailbox store: local mailboxes in SQLite, posts for a mailbox
    another host announces to the gateway; registrations open and close inboxes."""

    def __init__(self, hub: AmqpEventHub, local: SqliteMailboxStore) -> None:
        self.hub = hub
        self.local = local

    def _is_local(self, address: MailboxAddress) -> bool:
        return address in self.local.live or self.local.exists(address)

    def exists(self, address: MailboxAddress) -> bool:
        """Whether a post or send to ``address`` is accepted here; for an address no
        presence names, the gateway's typed answer (:meth:`Gateway.locate`)."""
        if self._is_local(address):
            return True
        host = self.hub.where(address)
        if host is None:
            host = self.hub.gateway.locate(address)
        return host != self.hub.host_id

    def opened(self, handles: Sequence[MailboxHandle]) -> None:
        for handle in handles:
            check_crossable(handle.address)  # refused before anything is registered
        self.local.opened(handles)
        for handle in handles:
            self.hub.gateway.open_inbox(handle.address)

    def unregister(
        self, handles: Sequence[MailboxHandle], close_live: Callable[[Sequence[MailboxHandle]], list[list[Message]]]
    ) -> list[list[Message]]:
        # First off the broker, its inboxes drained into the store: close() hands back
        # every post the broker confirmed, as on one host.
        self.hub.gateway.close_inboxes([handle.address for handle in handles])
        return self.local.unregister(handles, close_live)

    def park(self, handles: Sequence[MailboxHandle], unlive: Callable[[MailboxHandle], None]) -> None:
        self.local.park(handles, unlive)  # the inbox stays consumed: posts land in the store

    def append(self, message: Message) -> None:
        address = message.target_mailbox
        if address is None or self._is_local(address):
            self.local.append(message)
        else:
            self.hub.forward(message, address)

    def post_nowait(self, post: Callable[[], Message]) -> Future[Message]:
        """A local post is queued for the store's next group commit; a post forwarded
        to another host returns on the broker's confirm, its future already done."""
        return self.local.post_nowait(post)

    def consumed(self, message: Message, consumed: Message | None) -> None:
        self.local.consumed(message, consumed)

    def reader_closed(self, handle: MailboxHandle) -> None:
        self.local.reader_closed(handle)

    def receiving(self, address: MailboxAddress) -> None:
        self.local.receiving(address)


class _MarkRetained:
    """The hub core's last-value store: the SQLite one, noting which message is retained
    under which key so that its fan-out carries it."""

    def __init__(self, hub: AmqpEventHub, inner: LastValueStore) -> None:
        self.hub = hub
        self.inner = inner

    def retain(self, scope: CrewId | None, key: str, message: Message, remember: Callable[[], None]) -> None:
        self.hub.retaining[message.id] = (scope, key)
        self.inner.retain(scope, key, message, remember)


class AmqpEventHub(SqliteEventHub):
    """One host of a fleet (see the module docstring).

    Raises, when opening: the store's errors (``StoreLockedError``, ...),
    ``BrokerUnavailableError`` (no broker within ``FleetConfig.connect_timeout``),
    ``ExclusiveConsumerError`` (another gateway for this host id runs). Nothing is left
    running when opening fails.
    """

    def __init__(
        self,
        config: StoreConfig,
        fleet: FleetConfig,
        clock: Clock,
        scheduler: Scheduler,
        pipeline: Pipeline | None = None,
    ) -> None:
        self.fleet_config = fleet
        self.host_id = fleet.host_id
        self.retaining: dict[MessageId, tuple[CrewId | None, str]] = {}
        """Messages being retained, until their fan-out picks the key up."""
        self._retain_lock = threading.Lock()
        self._inbound: set[MessageId] = set()
        self._inbound_lock = threading.Lock()
        self.gateway = Gateway(fleet, self)
        """This host's gateway: broker link, signer, verifier, roster."""
        self.remote_cancels: RemoteCancels | None = None
        """``rt.fleet``'s cancels told to the replier's host (:mod:`~orkeon_actors.fleet.cancels`)."""
        try:
            super().__init__(
                config,
                clock,
                scheduler,
                pipeline,
                mailboxes_around=lambda local: _FleetMailboxes(self, local),
                last_values_around=lambda inner: _MarkRetained(self, inner),
                forward_post=lambda message: self._forward_outbox_post(message),
            )
        except BaseException:
            self.gateway.stop()
            raise
        self.route_listeners.append(self._fan_out)
        try:
            self._restore_seen()
            self._reopen_requests()
            kept = [address for address in sorted(self.durable_mailboxes, key=str) if _crossable(address)]
            self.gateway.preload_inboxes(kept)
            # Announced in the first heartbeat: a round without them would drop them from the others' views.
            self.gateway.roster.add(str(address) for address in kept)
            self.gateway.start()
            for address in kept:
                self.gateway.open_inbox(address, announce=False)
            self.gateway.roster.heartbeat()
            self.release_outbox()
            with self.readers.connection() as conn:
                left = self.sent.staged.pending_posts(conn)
            self.sent.staged.resume(left, self.republish)
        except BaseException:
            self.stop()
            raise

    # -- who is where -------------------------------------------------------------------

    def roster(self) -> list[Presence]:
        """Who is where: every live presence entry of the fleet (this host's included),
        by host then entity."""
        return self.gateway.roster.entries()

    def where(self, address: MailboxAddress | str) -> str | None:
        """The host announcing ``address`` now, or ``None``."""
        return self.gateway.lives_on(MailboxAddress.parse(address))

    # -- outgoing -----------------------------------------------------------------------

    def forward(self, message: Message, address: MailboxAddress) -> None:
        """Publish a post or request for ``address`` (on another host).
        ``MailboxNotFoundError`` at once if no host announces it.

        A post returns once the broker confirmed it (``MailboxNotFoundError`` if no inbox
        is bound to it any more, ``BrokerUnavailableError`` without a confirm in time). A
        request returns at once: its requester waits for the reply anyway, and a publish
        the broker refuses settles the pending request with the error instead (the
        ``send`` raises it), which saves a round trip per request. A post or request
        made with ``confirm_delivery=True`` returns once the recipient's host sent its
        DELIVERED receipt (``DeliveryNotConfirmedError`` without one in time)."""
        if self.where(address) in (None, self.host_id):
            raise MailboxNotFoundError(address)
        gateway = self.gateway
        key = mailbox_key(address)
        request = None if message.correlation_id is None else self.pending_request(message.correlation_id)
        receipt = delivery_confirmation_requested()
        if request is None or request.deadline is None:
            outgoing = self._post_outgoing(message, key, receipt=receipt)
            if receipt:
                gateway.publish_delivered(outgoing, address)
            else:
                gateway.publish(outgoing)
            return
        remaining = request.deadline - self.clock.monotonic()
        outgoing = gateway.outgoing(
            message,
            kind="post",
            routing_key=key,
            expires_at_ms=now_ms() + max(0, int(remaining * 1000)),
            receipt=receipt,
        )
        if receipt:  # the requester learns fast that the recipient's host does not take it
            gateway.publish_delivered(outgoing, address)
            return
        confirmed = gateway.link.publish(outgoing)

        def settled(done: Future[None]) -> None:
            error = done.exception()
            if error is not None:
                refusal = MailboxNotFoundError(address) if isinstance(error, UnroutableError) else error
                request.settle(refusal)

        confirmed.add_done_callback(settled)

    def _post_outgoing(self, message: Message, key: str, *, receipt: bool = False) -> Outgoing:
        """The signed envelope of a post, valid for ``message_ttl`` from now. Publishing
        the same message again (a resumed send) carries the same body, sender and
        recipient: the receiving gateway's seen-set drops it as a duplicate whatever its
        new expiry (:func:`~orkeon_actors.fleet.signing.message_digest`)."""
        expires = now_ms() + int(self.fleet_config.message_ttl * 1000)
        return self.gateway.outgoing(message, kind="post", routing_key=key, expires_at_ms=expires, receipt=receipt)

    def republish(self, message: Message) -> Future[None]:
        """Publish a post again with its original bytes (a sent-history intent resumed
        after a crash): mandatory and confirmed like the first time, without asking the
        roster first (right after a boot it may not have heard the recipient's host yet;
        the broker's mandatory flag answers instead). The future fails with
        ``MailboxNotFoundError`` if no inbox is bound to its mailbox."""
        address = message.target_mailbox
        if address is None:
            raise MailboxNotFoundError(address)
        published = self.gateway.link.publish(self._post_outgoing(message, mailbox_key(address)))
        result: Future[None] = Future()

        def settled(done: Future[None]) -> None:
            error = done.exception()
            if error is None:
                result.set_result(None)
            else:
                result.set_exception(MailboxNotFoundError(address) if isinstance(error, UnroutableError) else error)

        published.add_done_callback(settled)
        return result

    def _forward_outbox_post(self, message: Message) -> bool:
        """The outbox's hook: forward ``message`` if its mailbox is on another host."""
        address = message.target_mailbox
        if address is None or self.mailbox_store.exists(address):
            return False
        self.forward(message, address)
        return True

    def _fan_out(self, message: Message) -> None:
        """Route listener: publish a local topic message to the other hosts."""
        retain = self.retaining.pop(message.id, None)
        with self._inbound_lock:
            if message.id in self._inbound:
                return
        scope = message.target_crew_id
        key = topic_key(message.topic) if scope is None else scoped_topic_key(scope, message.topic)
        expires = now_ms() + int(self.fleet_config.message_ttl * 1000)
        gateway = self.gateway
        outgoing = gateway.outgoing(message, kind="topic", routing_key=key, expires_at_ms=expires, retain=retain)
        gateway.publish_nowait(outgoing, "topic publish")

    def _answer_remotely(self, request: PendingRequest, host: str, expires_at_ms: int) -> None:
        """A remote request was settled here: send its reply home (a timeout: nothing,
        the requester's own deadline fires there), then drop its kept reply route."""
        self.forget_request(request.correlation_id)
        outcome = request.outcome
        if isinstance(outcome, Message):
            gateway = self.gateway
            outgoing = gateway.outgoing(
                outcome, kind="answer", routing_key=answer_key(host), expires_at_ms=expires_at_ms
            )
            gateway.publish_nowait(outgoing, "reply")
        self._drop_routes([request.correlation_id])

    def _drop_routes(self, correlation_ids: list[str]) -> None:
        """Delete kept reply routes (not waiting for the commit). After the store
        closed they stay, and the next boot deletes those past their deadline."""
        try:
            self.writer.post(lambda conn: remote_requests.forget(conn, correlation_ids))
        except HubStoppedError:
            _log.debug(
                "host {}: store closed, {} reply route(s) left for the next boot", self.host_id, len(correlation_ids)
            )

    def _restore_seen(self) -> None:
        """At boot, before anything is consumed: the replay seen-set kept in this store
        back into the verifier, and new entries kept from now on
        (:mod:`~orkeon_actors.fleet.seen_store`)."""
        kept = self.writer.execute(lambda conn: seen_store.boot(conn, now_ms()))
        self.gateway.verifier.restore(kept)
        self._seen_writes = 0
        self.gateway.remember_seen = self._remember_seen

    def _remember_seen(self, entries: list[seen_store.Seen]) -> None:
        self._seen_writes += len(entries)
        prune = self._seen_writes >= seen_store.PRUNE_EVERY
        if prune:
            self._seen_writes = 0

        def write(conn: apsw.Connection) -> None:
            seen_store.remember(conn, entries)
            if prune:
                seen_store.prune(conn, now_ms())

        try:
            # keyed: a keyless write orders against every request, and would hold the
            # commits of others (a crew's sleep, a stop) behind whatever is queued before it
            self.writer.submit(write, key=seen_store.WRITE_KEY)
        except HubStoppedError:
            _log.warning(
                "host {}: store closed, {} received message id(s) not kept for replay checks after a restart",
                self.host_id,
                len(entries),
            )

    def _reopen_requests(self) -> None:
        """At boot: reopen the requests delivered here before a restart whose deadline
        has not passed (the others are deleted unanswered)."""
        kept = self.writer.execute(remote_requests.boot)
        now = now_ms()
        expired = [str(route.correlation_id) for route in kept if route.expires_at_ms <= now]
        for route in kept:
            if route.expires_at_ms > now:
                self._open_route_now(route)
        if expired:
            self.writer.execute(lambda conn: remote_requests.forget(conn, expired))
        if len(kept) > len(expired):
            _log.info(
                "host {}: reopened {} request(s) delivered before its restart", self.host_id, len(kept) - len(expired)
            )

    # -- incoming (the gateway's sink, on its worker threads) ------------------------------

    def _recheck_acl(self, message: Message, operation: str) -> None:
        """Defence in depth: the ACL stages of this host judge the verified sender again."""
        for stage in self.pipeline.stages:
            if isinstance(stage, AclMiddleware):
                stage.policy.decide(message, operation).raise_if_denied()

    def withdraw_request(self, correlation_id: CorrelationId) -> bool:
        """Withdraw a request delivered here (its requester cancelled it): a later reply
        raises ``UnknownCorrelationError``, now and after a restart (its kept reply
        route is deleted before this returns). Whether it was pending."""
        if self.pending_request(correlation_id) is None:
            return False
        self.forget_request(correlation_id)
        try:
            self.writer.execute(lambda conn: remote_requests.forget(conn, [correlation_id]))
        except HubStoppedError:
            _log.warning(
                "host {}: store closed, request {} withdrawn until its next boot only", self.host_id, correlation_id
            )
        return True

    def _open_routes(self, routes: list[RemoteRequest]) -> Waiter[None] | None:
        """Keep and open requests delivered here (unless their requester cancelled them
        already: :mod:`~orkeon_actors.fleet.cancels`), so that a local reply answers each
        and travels to its ``reply_host``. The insert of their reply routes is queued
        before any is opened, so the deletion of a route withdrawn or timed out from then
        on is queued behind it (a withdrawn request is never kept). The insert's waiter."""
        kept: list[Waiter[None] | None] = [None]

        def open_routes(admitted: list[RemoteRequest]) -> None:
            if admitted:
                kept[0] = self.writer.submit(lambda conn: remote_requests.remember(conn, admitted))
            for route in admitted:
                self._open_route_now(route)

        cancels = self.remote_cancels
        if cancels is None:
            open_routes(routes)
        else:
            cancels.open_unless_cancelled(routes, open_routes)
        return kept[0]

    def _open_route_now(self, route: RemoteRequest) -> None:
        if self.pending_request(route.correlation_id) is not None:
            return  # reopened at boot, then redelivered by the broker
        waiter: Waiter[Message] = Waiter()
        request = PendingRequest(
            route.correlation_id, route.requester_crew, route.target, waiter, route.requester_agent
        )
        waiter.on_settled = lambda: self._answer_remotely(request, route.reply_host, route.expires_at_ms)
        self.expect_reply(request, max(0.0, (route.expires_at_ms - now_ms()) / 1000))

    @staticmethod
    def _route_of(envelope: Envelope, address: MailboxAddress) -> RemoteRequest:
        message = envelope.message
        assert message.correlation_id is not None
        return RemoteRequest(
            message.correlation_id,
            message.source_crew_id,
            message.source_agent_id,
            address,
            envelope.host,
            envelope.expires_at_ms,
        )

    def take_posts(self, posts: list[tuple[Envelope, MailboxAddress, bool]]) -> list[BaseException | None]:
        """Keep verified posts in this host's store (one batch of group commits), each
        after its ACL re-check; a request is opened here first. The outcome of each."""
        outcomes: list[BaseException | None] = [None] * len(posts)
        kept: list[int] = []
        routes: list[RemoteRequest] = []
        for index, (envelope, address, redelivered) in enumerate(posts):
            message = envelope.message
            try:
                if address not in self.mailbox_store.live and not self.mailbox_store.exists(address):
                    raise MailboxNotFoundError(address)
                self._recheck_acl(message, "post" if message.correlation_id is None else "send")
                if redelivered and any(held.id == message.id for held in self.kept_messages(address)):
                    continue  # kept before the connection dropped: held, acknowledge it
                if message.correlation_id is not None:
                    routes.append(self._route_of(envelope, address))
            except Exception as exc:  # refused: told to the gateway, which dead-letters it
                outcomes[index] = exc
                continue
            kept.append(index)
        # Queued before the messages: committed in their group commit or an earlier one.
        routes_kept = self._open_routes(routes) if routes else None
        results = self.mailbox_store.append_many([posts[index][0].message for index in kept])
        if routes_kept is not None:
            try:
                routes_kept.wait()
            except EventHubError as exc:  # the requests are open and kept: only a restart would lose them
                _log.error(
                    "host {}: the reply routes of {} request(s) were not kept ({}): they do not survive a restart",
                    self.host_id,
                    len(routes),
                    exc,
                )
        refused: list[str] = []
        for index, result in zip(kept, results, strict=True):
            outcomes[index] = result
            correlation_id = posts[index][0].message.correlation_id
            if result is not None and correlation_id is not None:
                self.forget_request(correlation_id)
                refused.append(correlation_id)
        if refused:
            self._drop_routes(refused)
        return outcomes

    def take_topic(self, envelope: Envelope) -> None:
        message = envelope.message
        self._recheck_acl(message, "publish")
        with self._inbound_lock:
            self._inbound.add(message.id)
        try:
            if envelope.retain is not None:
                self.keep_last_value(*envelope.retain, message)
            self.route_live(message)
        finally:
            with self._inbound_lock:
                self._inbound.discard(message.id)

    # -- last values retained on other hosts ----------------------------------------------

    def keep_last_value(self, scope: CrewId | None, key: str, message: Message, *, recheck: bool = False) -> bool:
        """Keep ``message``, retained on another host, as the last value of ``(scope,
        key)`` unless this host holds a newer one (``last_value_sync.newer``: all hosts
        converge on the newest); whether it was kept. ``recheck``: this host's ACL
        judges its publisher first (raises its refusal)."""
        if recheck:
            self._recheck_acl(message, "publish")
        with self._retain_lock:
            held = self.last_value_held(key, scope)
            if not newer(message, held):
                return False
            self.writer.execute(
                lambda conn: last_values.retain(conn, scope, key, message),
                after_commit=lambda _: self.remember_last_value(scope, key, message),
                single_statement=True,
            )
        return True

    def take_answer(self, envelope: Envelope) -> None:
        self.answer(envelope.message)

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the gateway (unacknowledged deliveries return to their queues), then the
        local hub and its store. Idempotent."""
        self.gateway.stop()
        super().stop()

    def __repr__(self) -> str:
        return f"AmqpEventHub({self.host_id!r}, {self.config.path!r})"
