"""One host's gateway to the broker: its slice of the topology, signed publishing, and
verified, consume-and-hold delivery (cross-host messaging design, §2 invariant 6, §4, §8).

The gateway owns the host's :class:`~orkeon_actors.hub.amqp.link.BrokerLink` (one
connection, one I/O thread), its :class:`~orkeon_actors.fleet.signing.Signer` and
:class:`~orkeon_actors.fleet.signing.Verifier`, and its
:class:`~orkeon_actors.fleet.roster.Roster`. On every (re)connect it declares, in order:
the shared exchanges and ``fleet.dlq``, its roster queue, its topic fan-in
(``topics.<host>``), its answers queue (``answers.<host>``), its durable receipts queue
(``receipts.<host>``, :mod:`~orkeon_actors.fleet.receipts`), every inbox it opened, then
the extra steps given to :meth:`Gateway.add_topology`. It stays over 600 lines
(about 810) because the inbox, topic and answer paths share one verification order and one settling
rule (ack, drop a duplicate, or dead-letter); the parts that stand alone already live
beside it (:mod:`~orkeon_actors.fleet.inbox_batch`, :mod:`~orkeon_actors.fleet.lanes`,
:mod:`~orkeon_actors.fleet.receipts`).

Guarantees:

* **Signed out.** Everything it publishes is an :mod:`~orkeon_actors.wire.amqp` envelope
  signed by this host; a post or a request is ``mandatory`` and :meth:`Gateway.publish`
  returns once the broker confirmed it (``MailboxNotFoundError`` if no inbox is bound to
  the recipient, ``BrokerUnavailableError`` if no confirm came within
  ``FleetConfig.publish_timeout``). A sender seen for the first time is announced on the
  roster before its message is published.
* **Verified in.** Each delivery is decoded and verified in the design's order
  (signature; the claimed sender lives on the signing host by signed presence: a
  genuine message whose sender's presence is not heard yet is parked alone, up to
  ``presence_ttl``, never holding its lane (:mod:`~orkeon_actors.fleet.parking`); the
  message's source crew and agent are the signed sender; the recipient matches the
  routing key; not expired; not a replay, against a seen-set kept in the host's store
  (:mod:`~orkeon_actors.fleet.seen_store`)), then handed to the :class:`GatewaySink`. Any failure,
  the sink's refusal included: a copy to ``fleet.dlx`` carrying the reason, signed by
  this host (:mod:`~orkeon_actors.fleet.refusals`: topic and answer refusals too), then
  the delivery acknowledged, and an ERROR log naming the message and the reason; the
  queue never wedges. A security refusal is marked not to be reported to its claimed
  sender (its own copy was delivered, or it never sent one).
* **Duplicates are dropped, not refused.** A delivery repeating a message received
  already (same id, same signer, sender, recipient and body: what the link republishes
  after a reconnect when the broker had not confirmed it) is acknowledged and dropped,
  with a WARNING log, counted in :attr:`Gateway.duplicates` and on the counter
  ``orkeon_fleet_duplicates_total{lane}``: the first copy was kept (or refused and
  reported) already, so no false ``DeliveryFailed`` reaches its sender. One the broker
  marks ``redelivered`` still goes to the sink, which deduplicates it against what it
  keeps, unless this gateway acknowledged it into an inbox already (its reader may have
  consumed it since): then it is dropped too.
* **Receipts.** A post asking for one (``post(..., confirm_delivery=True)``) is
  confirmed to its poster's host once held and acknowledged (again for a duplicate of
  one confirmed already); :meth:`Gateway.publish_delivered` waits for that receipt
  (:mod:`~orkeon_actors.fleet.receipts`).
* **Consume-and-hold.** A delivery is acknowledged only after the sink returned, i.e.
  after the local store committed the message (an inbox) or the local router took it (a
  topic): a crash in between makes the broker redeliver it.
* **FIFO per inbox.** Deliveries of one queue are handled in order, on one worker thread
  per lane (inboxes, topics), never on the I/O thread.
* **Answers at once.** Replies and receipts on ``answers.<host>`` are settled on the I/O
  thread as they arrive (verify, decode, hand to the waiting request, ack: nothing there
  blocks), saving a thread hand-off per round trip; one whose sender's presence is not
  known yet goes to the answers lane, which waits for it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Final, Protocol

import attrs
from loguru import logger
from opentelemetry import metrics

from orkeon_actors.errors import (
    BrokerError,
    BrokerUnavailableError,
    EventHubError,
    InvalidArgumentError,
    MailboxNotFoundError,
    SignatureError,
    UnroutableError,
)
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.fleet.dead_letters import METER_NAME
from orkeon_actors.fleet.inbox_batch import InboxDeclarations
from orkeon_actors.fleet.lanes import Lane, drain_inboxes
from orkeon_actors.fleet.parking import Parking
from orkeon_actors.fleet.receipts import Receipts, receipt_for
from orkeon_actors.fleet.refusals import refusal_copy
from orkeon_actors.fleet.roster import GATEWAY, Roster
from orkeon_actors.fleet.seen_store import Seen
from orkeon_actors.fleet.signing import Signer, Verifier
from orkeon_actors.hub.amqp.inbox_probe import InboxProbe
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import (
    MAX_KEY_BYTES,
    MSG_EXCHANGE,
    TOPIC_FAN_IN,
    Declarer,
    answer_key,
    answers_queue,
    inbox_queue,
    mailbox_key,
    receipts_queue,
    topics_queue,
)
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.wire import amqp as wire

if TYPE_CHECKING:
    import pika.channel

__all__ = ["SENDER_PREFIX", "Gateway", "GatewaySink", "RejectedDelivery"]

_log = logger.bind(component="orkeon_actors.fleet")

SENDER_PREFIX: Final = "sender:"
"""Roster entities of senders that have no mailbox here (a client bound to a crew id):
announced so receivers can check where they live, never mistaken for a mailbox."""
_CONFIRMED_MAX = 10_000
"""How many confirmed post ids a gateway remembers, to confirm their duplicates again."""


def check_crossable(address: MailboxAddress) -> None:
    """``InvalidArgumentError`` unless ``address`` fits AMQP's 255-byte queue names and
    routing keys (its inbox is ``inbox.<address>``, its key ``mbox.<address>``)."""
    longest = max(len(inbox_queue(address).encode()), len(mailbox_key(address).encode()))
    if longest > MAX_KEY_BYTES:
        raise InvalidArgumentError(
            f"the mailbox address {address} is too long to cross hosts: its inbox name would be {longest} bytes, "
            f"AMQP allows {MAX_KEY_BYTES}; use shorter crew and agent ids"
        )


def now_ms() -> int:
    return int(time.time() * 1000)


@attrs.frozen
class RejectedDelivery:
    """A delivery this gateway dead-lettered, and why (told to ``Gateway.on_rejected``)."""

    queue: str
    routing_key: str
    message_id: str | None
    reason: str
    headers: Mapping[str, object]
    body: bytes


class GatewaySink(Protocol):
    """Where verified deliveries go (the adapter). Each call returns once the message is
    held locally (durably for an inbox) and raises to refuse it (it is dead-lettered)."""

    def take_posts(self, posts: list[tuple[wire.Envelope, MailboxAddress, bool]]) -> list[BaseException | None]:
        """Keep ``(envelope, inbox address, redelivered)`` posts, in order; the outcome of
        each: ``None`` (held: acknowledge it) or why it is refused."""
        ...

    def take_topic(self, envelope: wire.Envelope) -> None: ...

    def take_answer(self, envelope: wire.Envelope) -> None: ...


class Gateway:
    """This host's slice of the fleet (see the module docstring). Build, then
    :meth:`start`; :meth:`stop` when the hub stops."""

    def __init__(self, config: FleetConfig, sink: GatewaySink) -> None:
        self.config = config
        self.host_id = config.host_id
        self.entity = f"{GATEWAY}@{config.host_id}"
        """This gateway's roster entity (the sender of system traffic)."""
        self._sink = sink
        self._lock = threading.Lock()
        self._verify_lock = threading.Lock()
        self._inboxes: set[MailboxAddress] = set()
        self._consumed: set[MailboxAddress] = set()
        self._unbind: set[MailboxAddress] = set()
        """Inboxes closed while the broker was unreachable: unbound on the reconnect."""
        self._stopped = False
        self._extra: list[Callable[[Declarer], Declarer]] = []
        self._announced: set[str] = {self.entity}
        self.on_rejected: list[Callable[[RejectedDelivery], None]] = []
        """Told of every delivery this gateway dead-lettered (on a worker thread, or on the
        I/O thread for an answer: a listener must not block)."""
        self.rejected = 0
        """How many deliveries it dead-lettered (a metric)."""
        self.duplicates = 0
        """How many duplicate deliveries it acknowledged and dropped (a metric)."""
        self.inbox_batches = 0
        self.inbox_deliveries = 0
        """Inbox batches handled and the deliveries in them: their mean is the batch the
        durable hold commits (``orkeon bench amqp``'s ``post_receive_hold_batch``)."""
        self._duplicates_counter = (
            metrics.get_meter_provider()
            .get_meter(METER_NAME)
            .create_counter(
                "orkeon_fleet_duplicates_total",
                unit="{message}",
                description="deliveries repeating a message already received, acknowledged and dropped",
            )
        )
        self.link = BrokerLink(config.url, name=f"orkeon-{config.host_id}", on_connected=self._declare)
        self.uncapped: dict[str, str] = {}
        """Inboxes found declared without this host's caps (or with other ones), with
        what the broker said of each (:meth:`_uncapped`)."""
        self._probe = InboxProbe(self._uncapped)
        self._declarations = InboxDeclarations(self.link, config.connect_timeout, config.inbox_caps, self._probe)
        self.signer = Signer(config.host_id, config.keys)
        self.verifier = Verifier(config.keys, self.sender_host, now_ms, seen=config.seen)
        self.roster = Roster(
            config.host_id,
            self.link,
            self.signer,
            self.verifier,
            kinds=config.kinds,
            interval=config.presence_interval,
            ttl=config.presence_ttl,
        )
        self._inbox_lane = Lane(f"gateway-{config.host_id}-inboxes", self._inbox_deliveries, config.prefetch)
        self._topic_lane = Lane(f"gateway-{config.host_id}-topics", self._each(self._topic_delivery))
        self._answer_lane = Lane(f"gateway-{config.host_id}-answers", self._each(self._answer_delivery))
        self._parking = Parking(
            f"gateway-{config.host_id}-parked",
            self._sender_known,
            lambda delivery, reason: self._reject(delivery, reason, report=False),
            config.presence_ttl,
        )
        self._started = False
        self._connected_at = time.monotonic()
        self.receipts = Receipts()
        """The posts of this host waiting for a DELIVERED receipt."""
        self._confirmed: OrderedDict[str, None] = OrderedDict()
        self._kept: OrderedDict[str, None] = OrderedDict()
        """Ids of posts held in an inbox and acknowledged: a broker redelivery of one
        (after a connection cut) is a duplicate even once its reader consumed it."""
        self.remember_seen: Callable[[list[Seen]], None] | None = None
        """Keeps the ids this gateway saw the first time in the host's store (set by the
        hub: :mod:`~orkeon_actors.fleet.seen_store`), queued before what they came with."""

    # -- topology ---------------------------------------------------------------------

    def add_topology(self, step: Callable[[Declarer], Declarer]) -> None:
        """Declare more on every (re)connect, after this gateway's slice (e.g. the
        control queue); once started, also at once (returns when the broker answered)."""
        self._extra.append(step)
        if self._started:
            self._run_declarer(step(Declarer(self.config.inbox_caps)))

    def _slice(self) -> Declarer:
        host = self.host_id
        declarer = Declarer(self.config.inbox_caps).shared().roster(host)
        declarer.listener(topics_queue(host), TOPIC_FAN_IN).listener(answers_queue(host), [answer_key(host)])
        declarer.receipts(host)
        with self._lock:
            inboxes = sorted(self._inboxes, key=str)
            unbind = sorted(self._unbind, key=str)
        for address in inboxes:
            declarer.inbox(address)
        for address in unbind:  # closed while the broker was away (declared first: it may be gone)
            declarer.inbox(address).unbind_inbox(address)
        for step in self._extra:
            declarer = step(declarer)
        return declarer

    def _declare(self, channel: pika.channel.Channel, done: Callable[[], None]) -> None:
        self._connected_at = time.monotonic()  # the view refills from here
        covered = self._declarations.take_all()  # their inboxes are in the slice

        def declared() -> None:
            for future in covered:
                if not future.done():
                    future.set_result(None)
            done()

        self._slice().run(channel, declared, self._probe)

    def _run_declarer(self, declarer: Declarer) -> None:
        """Run ``declarer`` on the I/O thread and wait until the broker answered it."""
        finished: Future[None] = Future()

        def run() -> None:
            channel = self.link.channel
            if channel is None:
                finished.set_exception(BrokerUnavailableError("the broker link has no channel (reconnecting)"))
                return
            declarer.run(channel, lambda: finished.set_result(None), self._probe)

        self.link.run_on_io_thread(run)
        try:
            finished.result(self.config.connect_timeout)
        except FutureTimeout:
            raise BrokerUnavailableError(
                f"the broker did not answer a declaration within {self.config.connect_timeout} s"
            ) from None

    def _uncapped(self, queue: str, text: str) -> None:
        """An inbox exists with arguments other than this host's caps (on the I/O thread):
        say so once per inbox (WARNING), and keep using it as it is."""
        if queue in self.uncapped:
            return
        self.uncapped[queue] = text
        caps = self.config.inbox_caps
        _log.warning(
            "inbox {} exists without this host's caps (max_length={}, max_length_bytes={}, message_ttl_ms={}): the "
            "broker says {}. It is used as it is, capped only by a policy if one applies. Fix it with `orkeon "
            "fleet caps --apply` on the broker's machine (the same caps as this host's --inbox-* flags): it caps "
            "every inbox by policy at once, and redeclares with these caps the inboxes no host consumes "
            "(stop this host first to have {} redeclared, and this warning ends)",
            queue,
            caps.max_length,
            caps.max_length_bytes,
            caps.message_ttl_ms,
            text,
            queue,
        )

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> Gateway:
        """Connect, declare the slice, consume the topic fan-in and the answers, start
        the roster. Raises ``BrokerUnavailableError`` if the broker does not answer
        within ``connect_timeout``."""
        self.link.start(self.config.connect_timeout)
        self.link.consume(topics_queue(self.host_id), self._topic_lane.put, prefetch=self.config.prefetch)
        self.link.consume(answers_queue(self.host_id), self._answer_arrived, prefetch=self.config.prefetch)
        self.link.consume(receipts_queue(self.host_id), self._answer_arrived, prefetch=self.config.prefetch)
        self.roster.add([self.entity])
        self.roster.start()
        self._started = True
        return self

    def stop(self) -> None:
        """Stop heartbeating, end the workers (the delivery in hand is finished), close
        the link (unacknowledged deliveries return to their queues). Idempotent."""
        self._stopped = True
        self.roster.stop()
        self._parking.stop()
        for lane in (self._inbox_lane, self._topic_lane, self._answer_lane):
            lane.stop()
        self.link.stop()

    # -- inboxes ------------------------------------------------------------------------

    def preload_inboxes(self, addresses: Sequence[MailboxAddress]) -> None:
        """Before :meth:`start`: inboxes to declare with the slice itself (a host's
        durable mailboxes at boot), so that opening them costs no declaration each."""
        with self._lock:
            self._inboxes.update(addresses)

    def open_inbox(self, address: MailboxAddress, *, announce: bool = True) -> None:
        """Declare ``address``'s durable inbox bound to its mailbox key, consume it
        (exclusive, manual acks, bounded prefetch) and announce it (at once unless
        ``announce`` is false: the next heartbeat carries it). Idempotent. Many crews
        opening at once share batched declarations (:mod:`~orkeon_actors.fleet.inbox_batch`)
        and wait however long the burst takes while the broker keeps answering:
        ``BrokerUnavailableError`` only after ``connect_timeout`` seconds of its silence.
        ``ExclusiveConsumerError`` if another gateway holds it; ``InvalidArgumentError``
        if the address is too long for an AMQP queue name or routing key."""
        check_crossable(address)
        with self._lock:
            new_binding = address not in self._inboxes
            self._inboxes.add(address)
            self._unbind.discard(address)
            new_consumer = address not in self._consumed
            self._consumed.add(address)
        connected = self.link.connected
        if new_binding and connected:
            self._declarations.declare(address)
        if new_consumer:
            try:
                self.link.consume(
                    inbox_queue(address),
                    self._inbox_lane.put,
                    prefetch=self.config.prefetch,
                    wait=connected,
                    timeout=self.config.connect_timeout,
                )
            except BaseException:
                with self._lock:
                    self._consumed.discard(address)
                raise
        if not connected:  # declared and consumed with the reconnect (the slice holds it)
            _log.warning("the broker is unreachable: {} is reachable from other hosts once it is back", address)
        self.roster.add([str(address)])
        if new_binding and announce:
            self.roster.heartbeat()

    def close_inboxes(self, addresses: Sequence[MailboxAddress]) -> None:
        """Take ``addresses`` off their mailbox keys and the roster, then hand what their
        inboxes still hold to the sink before returning (:meth:`BrokerLink.drain`, then
        the inbox lane's fence): the caller closes the local mailboxes next, so a post
        the broker confirmed before the unbind is kept by the local store and handed back
        by ``close()``, as on one host; a post after it fails at its poster (unroutable:
        ``MailboxNotFoundError``). Without the broker (or when the drain does not finish
        within ``connect_timeout``) what an inbox still holds is refused by the sink and
        dead-lettered, so reported to its senders, never lost silently (WARNING)."""
        closing: list[MailboxAddress] = []
        with self._lock:
            for address in addresses:
                if address in self._inboxes:
                    self._inboxes.discard(address)
                    closing.append(address)
            if self._stopped or not closing:
                return  # the host is gone: its roster entries expire, posts are refused
            drained = [address for address in closing if address in self._consumed]
        self.roster.remove(str(address) for address in closing)
        unbind = Declarer()
        for address in closing:
            unbind.unbind_inbox(address)
        try:
            if not self.link.connected:
                raise BrokerUnavailableError("the broker is unreachable")
            self._run_declarer(unbind)
        except BrokerUnavailableError as exc:
            with self._lock:
                self._unbind.update(closing)
            _log.warning(
                "{}: {} unbound when it is back (posts meanwhile are dead-lettered)",
                exc,
                ", ".join(map(str, closing)),
            )
            return
        drain_inboxes(self._inbox_lane, self.link, drained, self.config.connect_timeout)

    def lives_on(self, address: MailboxAddress) -> str | None:
        """The host announcing ``address`` now (this one included), or ``None``."""
        return self.roster.lives_on(str(address))

    def locate(self, address: MailboxAddress) -> str:
        """The host announcing ``address``, for a post or send to it that no presence
        names now. ``BrokerUnavailableError`` while the broker is unreachable (presence
        is heard through it: an outage longer than the TTL empties the view, and says
        nothing about the mailbox); within two presence intervals of a (re)connect it
        waits for the view to refill; then ``MailboxNotFoundError`` naming the hosts
        asked and how long ago each was heard."""
        if not self.link.connected:
            raise BrokerUnavailableError(
                f"cannot tell which host holds {address}: the broker is unreachable and presence is heard through "
                "it; retry once it is back"
            )
        settled = self._connected_at + 2 * self.config.presence_interval
        while (host := self.lives_on(address)) is None and time.monotonic() < settled:
            time.sleep(0.01)
        if host is not None:
            return host
        heard = self.roster.heard()
        asked = ", ".join(f"{name} (heard {age:.1f} s ago)" for name, age in heard.items()) or "none"
        raise MailboxNotFoundError(
            address, detail=f"no host of the fleet announces it; hosts on this host's roster: {asked}"
        )

    def sender_host(self, sender: str) -> str | None:
        """Where ``sender`` lives by signed presence (a mailbox, or a sender announced
        without one)."""
        return self.roster.lives_on(sender) or self.roster.lives_on(SENDER_PREFIX + sender)

    # -- publishing ---------------------------------------------------------------------

    def _announce_sender(self, sender: str) -> None:
        with self._lock:
            if sender in self._announced:
                return
            self._announced.add(sender)
        if self.roster.lives_on(sender) != self.host_id:
            self.roster.add([SENDER_PREFIX + sender])
            self.roster.heartbeat()

    def outgoing(
        self,
        message: Message,
        *,
        kind: str,
        routing_key: str,
        expires_at_ms: int,
        retain: tuple[CrewId | None, str] | None = None,
        receipt: bool = False,
    ) -> Outgoing:
        """The signed AMQP message for ``message`` (announcing its sender if new);
        ``receipt`` asks the recipient's gateway for a DELIVERED receipt."""
        sender = wire.sender_of(message, self.entity)
        self._announce_sender(sender)
        headers, body = wire.encode(
            message,
            kind=kind,
            to=routing_key,
            sender=sender,
            expires_at_ms=expires_at_ms,
            retain=retain,
            receipt=receipt,
        )
        signed = self.signer.sign(headers, body)
        # Only a post outlives its sender's process: requests, replies and publishes are
        # live (a requester that restarts has given up), so the broker need not write them.
        durable = kind == "post" and message.correlation_id is None
        return Outgoing(
            MSG_EXCHANGE, routing_key, body, str(message.id), signed, mandatory=kind != "topic", persistent=durable
        )

    def publish(self, outgoing: Outgoing) -> None:
        """Publish and wait for the broker's confirm (see the module docstring)."""
        try:
            self.link.publish_and_wait(outgoing, self.config.publish_timeout)
        except UnroutableError:
            raise MailboxNotFoundError(
                f"{outgoing.routing_key.removeprefix('mbox.')} (no host's inbox is bound to it: its crew closed "
                "the mailbox or its host is gone)"
            ) from None

    def publish_delivered(self, outgoing: Outgoing, recipient: MailboxAddress) -> None:
        """:meth:`publish` a post made with ``receipt``, then wait up to
        ``FleetConfig.delivery_timeout`` for the DELIVERED receipt of the host announcing
        ``recipient``: ``DeliveryNotConfirmedError`` without one (the message is not
        withdrawn), or :meth:`publish`'s errors."""
        self.receipts.expect(outgoing.message_id, self.lives_on(recipient))
        try:
            self.publish(outgoing)
        except BaseException:
            self.receipts.forget(outgoing.message_id)
            raise
        self.receipts.wait(outgoing.message_id, str(recipient), self.config.delivery_timeout)

    def publish_nowait(self, outgoing: Outgoing, what: str) -> None:
        """Publish without waiting for the confirm (topic fan-out, answers); a failure
        is logged as an ERROR naming ``what``."""
        future = self.link.publish(outgoing)

        def settled(done: Future[None]) -> None:
            error = done.exception()
            if error is not None:
                _log.error("{} {} was not published: {}", what, outgoing.message_id, error)

        future.add_done_callback(settled)

    # -- receiving ----------------------------------------------------------------------

    def _verified(self, delivery: Delivery, requeue: Callable[[Delivery], None]) -> wire.Envelope | None:
        """The verified envelope of ``delivery``; ``None`` for a duplicate (acknowledged
        and dropped here) or one parked (see :meth:`_checked`). Raises
        ``SignatureError`` for a refused one."""
        if not self._checked(delivery, requeue):
            return None
        envelope = wire.decode(delivery.headers, delivery.body)
        self._check_identity(envelope, delivery.headers)
        return envelope

    @staticmethod
    def _check_identity(envelope: wire.Envelope, headers: Mapping[str, object]) -> None:
        """``SignatureError`` unless the identity the receiver acts on (the message's
        source crew and agent: its reader's sender, the ACL re-check's subject, a
        reply's route) is the signed ``from`` header, which the verifier tied to the
        signing host by signed presence; a request's reply goes to that host
        (``envelope.host``), never to an address the body names."""
        claimed = wire.sender_of(envelope.message, f"{GATEWAY}@{envelope.host}")
        signed_from = str(headers.get("from", ""))
        if claimed != signed_from:
            raise SignatureError(
                f"the message names {claimed} as its source, but host {envelope.host!r} signed it as from "
                f"{signed_from}: impersonation refused"
            )

    def _checked(self, delivery: Delivery, requeue: Callable[[Delivery], None]) -> bool:
        """Verify ``delivery``; ``False`` for a duplicate, acknowledged and dropped here,
        or for one whose sender's presence is not known yet: a genuine one (its
        signature checked) is parked alone (:mod:`~orkeon_actors.fleet.parking`) and
        handed to ``requeue`` (its lane) once the presence is heard, never waited for
        on the lane."""
        headers, body = delivery.headers, delivery.body
        if self._parking.holds(delivery):  # behind a parked delivery of its queue: FIFO
            self._parking.park(delivery, requeue)
            return False
        if not self._sender_known(delivery):  # a first message may outrun its sender's announcement
            self.verifier.signing_host(headers, body)  # only a genuine message is parked
            self._parking.park(delivery, requeue)
            return False
        with self._verify_lock:  # the seen-set is shared by the three lanes
            first = self.verifier.verify(headers, body, delivery.routing_key)
            kept = delivery.message_id in self._kept
        if not first and (not delivery.redelivered or kept):
            self._drop_duplicate(delivery)
            return False
        return True

    def first_sight(self, headers: Mapping[str, object], body: bytes) -> bool:
        """The seen-set's check for a message verified elsewhere (a control request):
        ``True`` the first time (remembered, and kept in the store), ``False`` for a
        duplicate, ``SignatureError`` for a seen id with other content."""
        with self._verify_lock:
            first = self.verifier.first_sight(headers, body)
        self._flush_seen()
        return first

    def _flush_seen(self) -> None:
        """Hand the ids seen the first time to :attr:`remember_seen` (before the store
        is given what they came with)."""
        with self._verify_lock:
            new = self.verifier.take_new()
        if new and self.remember_seen is not None:
            self.remember_seen(new)

    def _drop_duplicate(self, delivery: Delivery) -> None:
        lane = "inbox" if delivery.queue.startswith("inbox.") else delivery.queue.partition(".")[0]
        _log.warning(
            "gateway {} dropped message {} from {} on {}{}: it was received already (an exact replay, "
            "or a republish after a broker cut); not delivered again",
            self.host_id,
            delivery.message_id,
            delivery.headers.get("from"),
            delivery.queue,
            " (redelivered by the broker)" if delivery.redelivered else "",
        )
        self.link.ack(delivery)
        with self._lock:
            self.duplicates += 1
            confirmed = delivery.message_id in self._confirmed
        self._duplicates_counter.add(1, {"lane": lane})
        if confirmed:  # its first receipt may have been lost with the poster's connection
            try:
                envelope = wire.decode(delivery.headers, delivery.body)
            except SignatureError as exc:  # it decoded the first time: it cannot differ now
                _log.error(
                    "duplicate {} of a confirmed post is unreadable ({}): not confirmed again", delivery.message_id, exc
                )
                return
            self._confirm(envelope, MailboxAddress.parse(delivery.queue.removeprefix("inbox.")))

    def _confirm(self, envelope: wire.Envelope, address: MailboxAddress) -> None:
        """Send the DELIVERED receipt of ``envelope``, held in ``address``."""
        message_id = str(envelope.message.id)
        with self._lock:
            self._confirmed[message_id] = None
            self._confirmed.move_to_end(message_id)
            if len(self._confirmed) > _CONFIRMED_MAX:
                self._confirmed.popitem(last=False)
        self.publish_nowait(receipt_for(envelope, address, self.signer, self.entity), "DELIVERED receipt")

    def _sender_known(self, delivery: Delivery) -> bool:
        return self.sender_host(str(delivery.headers.get("from", ""))) is not None

    def _settle(
        self,
        delivery: Delivery,
        take: Callable[[wire.Envelope], None],
        requeue: Callable[[Delivery], None],
    ) -> None:
        try:
            envelope = self._verified(delivery, requeue)
            self._flush_seen()
            if envelope is None:
                return
            take(envelope)
        except (SignatureError, EventHubError, BrokerError) as exc:
            self._refuse(delivery, exc)
            return
        except Exception as exc:  # a bug must not wedge the queue: dead-letter, loudly
            _log.opt(exception=True).error("handling delivery {} failed", delivery.message_id)
            self._refuse(delivery, exc)
            return
        self.link.ack(delivery)

    def _refuse(self, delivery: Delivery, error: BaseException) -> None:
        """:meth:`_reject` ``delivery`` for ``error``: reported to its sender unless it
        is a security refusal (a ``SignatureError``: forged, replayed, misrouted,
        impersonating), which the sender's own copy never met, except for a genuine
        message that expired before this host ever saw its id."""
        report = not isinstance(error, SignatureError) or self._expired_unseen(delivery)
        self._reject(delivery, f"{type(error).__name__}: {error}", report=report)

    def _expired_unseen(self, delivery: Delivery) -> bool:
        headers = delivery.headers
        try:
            if int(str(headers.get("expires_at"))) > now_ms():
                return False
            self.verifier.signer_of(headers, delivery.body)
        except (ValueError, SignatureError):
            return False
        with self._verify_lock:
            return not self.verifier.has_seen(str(headers.get("message_id")))

    def _reject(self, delivery: Delivery, reason: str, *, report: bool) -> None:
        """Copy ``delivery`` to ``fleet.dlx`` with the signed refusal
        (:mod:`~orkeon_actors.fleet.refusals`), then acknowledge it; ``report``: its
        sender is told (``DeliveryFailed``)."""
        _log.error(
            "gateway {} refused message {} from {} on {} (key {}): {}; dead-lettered to fleet.dlx{}",
            self.host_id,
            delivery.message_id,
            delivery.headers.get("from"),
            delivery.queue,
            delivery.routing_key,
            reason,
            "" if report else " (a security refusal: not reported to the claimed sender)",
        )
        future = self.link.publish(refusal_copy(delivery, reason, report=report, signer=self.signer))

        def copied(done: Future[None]) -> None:
            error = done.exception()
            if error is None:
                self.link.ack(delivery)
                return
            _log.error(
                "the refusal of message {} was not copied to fleet.dlx ({}): rejected instead (an inbox's "
                "dead-letter exchange keeps it, without the reason)",
                delivery.message_id,
                error,
            )
            self.link.reject(delivery)

        future.add_done_callback(copied)
        self.rejected += 1
        rejected = RejectedDelivery(
            delivery.queue, delivery.routing_key, delivery.message_id, reason, dict(delivery.headers), delivery.body
        )
        for listener in list(self.on_rejected):
            listener(rejected)

    @staticmethod
    def _each(handle: Callable[[Delivery], None]) -> Callable[[list[Delivery]], None]:
        def handle_all(deliveries: list[Delivery]) -> None:
            for delivery in deliveries:
                handle(delivery)

        return handle_all

    def _inbox_deliveries(self, deliveries: list[Delivery]) -> None:
        """Verify each delivery, keep the verified ones in one batch, settle each."""
        self.inbox_batches += 1  # one lane thread: no lock
        self.inbox_deliveries += len(deliveries)
        verified: list[tuple[Delivery, tuple[wire.Envelope, MailboxAddress, bool]]] = []
        for delivery in deliveries:
            try:
                address = MailboxAddress.parse(delivery.queue.removeprefix("inbox."))
                envelope = self._verified(delivery, self._inbox_lane.put)
                if envelope is None:
                    continue
                if envelope.kind != "post" or envelope.message.target_mailbox != address:
                    raise SignatureError(
                        f"a {envelope.kind} for {envelope.message.target_mailbox} arrived in the inbox of {address}"
                    )
            except (SignatureError, EventHubError, BrokerError) as exc:
                self._refuse(delivery, exc)
                continue
            verified.append((delivery, (envelope, address, delivery.redelivered)))
        self._flush_seen()  # queued before the posts: committed with them or earlier
        if not verified:
            return
        try:
            outcomes = self._sink.take_posts([post for _, post in verified])
        except Exception as exc:  # a bug must not wedge the inboxes: dead-letter, loudly
            _log.opt(exception=True).error("keeping {} delivered post(s) failed", len(verified))
            outcomes = [exc] * len(verified)
        for (delivery, (envelope, address, _)), outcome in zip(verified, outcomes, strict=True):
            if outcome is None:
                self.link.ack(delivery)
                self._remember_kept(str(envelope.message.id))
                if envelope.receipt:
                    self._confirm(envelope, address)
            else:
                self._refuse(delivery, outcome)

    def _remember_kept(self, message_id: str) -> None:
        with self._verify_lock:
            self._kept[message_id] = None
            if len(self._kept) > self.config.seen:
                self._kept.popitem(last=False)

    def _topic_delivery(self, delivery: Delivery) -> None:
        def take(envelope: wire.Envelope) -> None:
            if envelope.kind != "topic":
                raise SignatureError(f"a {envelope.kind} arrived on the topic fan-in")
            if envelope.host != self.host_id:  # our own publishes were routed here already
                self._sink.take_topic(envelope)

        self._settle(delivery, take, self._topic_lane.put)

    def _answer_arrived(self, delivery: Delivery) -> None:
        """On the I/O thread: an answer (a reply or a receipt) is settled here at once,
        with no thread hand-off: verified, decoded, handed to the request or post waiting
        for it (whose waiters' callbacks must not block), acknowledged. One whose
        sender's presence is not known yet, which may mean waiting for it, goes to the
        answers lane instead, which waits."""
        if self._stopped:
            return  # nothing is acknowledged after stop: the queue goes with the connection
        self._answer_delivery(delivery)

    def _answer_delivery(self, delivery: Delivery) -> None:
        if wire.is_receipt(delivery.body):
            self._receipt_delivery(delivery)
            return

        def take(envelope: wire.Envelope) -> None:
            if envelope.kind != "answer":
                raise SignatureError(f"a {envelope.kind} arrived on the answers queue")
            self._sink.take_answer(envelope)

        self._settle(delivery, take, self._answer_lane.put)

    def _receipt_delivery(self, delivery: Delivery) -> None:
        try:
            checked = self._checked(delivery, self._answer_lane.put)
            self._flush_seen()
            if not checked:
                return
            receipt = wire.decode_receipt(delivery.headers, delivery.body)
        except (SignatureError, EventHubError) as exc:
            self._reject(delivery, f"{type(exc).__name__}: {exc}", report=False)  # a receipt's sender is a gateway
            return
        self.link.ack(delivery)
        self.receipts.delivered(receipt)
