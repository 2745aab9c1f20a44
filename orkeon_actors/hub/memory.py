"""The hub core (:class:`HubCore`) and the in-memory adapter of the EventHub port
(:class:`InMemoryEventHub`, the core without collaborators): every mailbox is a pykka
actor.

The core holds everything live delivery needs; an adapter whose mailboxes outlive the
process (``orkeon_actors.store``) gives it a :class:`MailboxStore`, a
:class:`~orkeon_actors.hub.port.DispatchObserver` and a :class:`LastValueStore` instead
of overriding its internals. The core's handles (subscriptions, readers, registrations) are in
:mod:`~orkeon_actors.hub.handles`, its collaborators' protocols in
:mod:`~orkeon_actors.hub.collaborators`. Parts of its state are small classes owning
their own lock contract: the live mailbox table (:mod:`~orkeon_actors.hub.live_mailboxes`),
the tracked waiters with the wait steps (:mod:`~orkeon_actors.hub.waits`, reached back
through the core's public protocol) and the pending replies
(:mod:`~orkeon_actors.hub.replies`); the core keeps the composed chains, the delivery
terminals and the port's entry points. It is still about 880 lines: the request/reply
machinery (opening a pending request, waiting for the original of a keyed send,
``send``, ``reply`` and their terminals, about 170 lines) is the next part to move, to
:mod:`~orkeon_actors.hub.replies`, once the core gives it its keyed-send and delivery
steps by public names.

Where the work happens (ARCHITECTURE §3):

* ``publish`` runs the publish stages and routes in the caller's thread, pushing into
  each matching subscriber's local buffer (copy-on-write router, no lock on the hot path);
* ``post`` / ``send`` run the publish stages in the caller's thread and ``tell`` the
  target mailbox actor;
* ``reply`` completes the requester's waiter directly;
* waits are registered waiters settled by a message, by the scheduler actor (finite
  timeouts, budget deadlines) or by a cancel token; only the caller's own thread blocks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from time import monotonic
from typing import NoReturn

from loguru import logger

from orkeon_actors.errors import (
    CancelledError,
    DuplicateMessageError,
    HubStoppedError,
    InvalidArgumentError,
    MailboxAlreadyRegisteredError,
    MailboxNotFoundError,
    SchedulerFailedError,
    SentHistoryUnavailableError,
    UnknownCorrelationError,
)
from orkeon_actors.hub.collaborators import LastValueStore, MailboxStore, SentRecorder
from orkeon_actors.hub.crew_names import CrewNames
from orkeon_actors.hub.handles import MemoryRegistration, MemorySubscription, WaitRegistration
from orkeon_actors.hub.live_mailboxes import LiveMailboxes
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.hub.observe import WaitObserver
from orkeon_actors.hub.pipeline import EventHubMiddleware, Next, Pipeline
from orkeon_actors.hub.port import (
    POST_TOPIC,
    REPLY_TOPIC,
    SEND_TOPIC,
    CallerContext,
    DispatchObserver,
    EventHub,
    MailboxLease,
    MailboxRegistration,
    Subscription,
)
from orkeon_actors.hub.quotas import CallerQuotas
from orkeon_actors.hub.replies import PendingReplies, PendingRequest
from orkeon_actors.hub.routing import TopicRouter
from orkeon_actors.hub.scheduler import Scheduler
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.hub.waits import HubWaits
from orkeon_actors.model.address import MailboxAddress, Scheme
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.clock import Clock, SystemClock
from orkeon_actors.model.ids import CorrelationId, CrewId, new_correlation_id, new_message_id
from orkeon_actors.model.limits import DEFAULT_LIMITS, Limits
from orkeon_actors.model.message import (
    NO_DECLARED_SCHEMA_ID,
    FrozenMap,
    Message,
    encode_payload,
    freeze_metadata,
    stamped_message,
)
from orkeon_actors.model.options import (
    PublishOptions,
    WaitDescriptor,
    WaitTimeout,
)

__all__ = [
    "POST_TOPIC",
    "REPLY_TOPIC",
    "SEND_TOPIC",
    "HubCore",
    "InMemoryEventHub",
    "LastValueStore",
    "MailboxStore",
    "MemorySubscription",
    "SentRecorder",
    "WaitRegistration",
    "note_crew_finished",
]


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key or len(key) > 200:
        raise InvalidArgumentError(f"idempotency_key must be a non-empty string of at most 200 characters, got {key!r}")
    return key


class HubCore(EventHub):
    """The live side of every adapter of the port: the topic router, the mailbox
    actors, waiters, pending replies and the middleware chains. Thread-safe.

    An adapter configures it with small collaborators instead of overriding its
    internals: a :class:`MailboxStore` (where mailboxes outlive the process), a
    :class:`~orkeon_actors.hub.port.DispatchObserver` (told of every routing and
    dispatch) and a :class:`LastValueStore`. Without them it is the in-memory adapter
    (:class:`InMemoryEventHub`), on the fast path (one ``is None`` test per hook).

    Its public methods below the port's (``consume``, ``register_wait``, ``block``, ...)
    are the core's own protocol with its handles and the non-blocking waits of
    :mod:`orkeon_actors.hub.async_wait`; callers of the port never need them.
    """

    def __init__(
        self,
        clock: Clock,
        scheduler: Scheduler,
        pipeline: Pipeline | None = None,
        *,
        mailbox_store: MailboxStore | None = None,
        observer: DispatchObserver | None = None,
        last_value_store: LastValueStore | None = None,
        sent_recorder: SentRecorder | None = None,
    ) -> None:
        self.clock = clock
        self._sent = sent_recorder
        self.crew_names = CrewNames()
        """The readable names of the crews live here (display only: sent rows record them)."""
        self.before_last_value_read: Callable[[], None] | None = None
        """A collaborator's gate run before every ``get_last_value`` (the distributed hub
        holds early reads until its boot exchange of last values finished); it may block,
        bounded by its own deadline."""
        self.on_send_cancelled: Callable[[CorrelationId, MailboxAddress], None] | None = None
        """A collaborator told of every ``send`` whose caller cancelled it, before its
        ``CancelledError`` is raised (the distributed hub withdraws the request on the
        recipient's host); it runs on the caller's thread."""
        self._store = mailbox_store
        self.keeps_mailboxes = mailbox_store is not None
        """Whether a mailbox store hears of receives (``receiving``, ``consume``); a held
        reader skips both calls per message when not (the hot path, issue 31)."""
        self._observer = observer
        self._last_value_store = last_value_store
        self.scheduler = scheduler
        self._times_own_waits = type(clock) is SystemClock
        """Whether a blocking ``send`` times its wait on its own thread (``time.monotonic``,
        the system clock's) rather than through a scheduler timer; any other clock (a
        virtual one, a subclass) keeps the scheduler, which follows that clock."""
        self.pipeline = pipeline or Pipeline()
        self._router = TopicRouter()
        self._replies = PendingReplies()
        self.limits: Limits = DEFAULT_LIMITS
        """The runtime's bounds (``Runtime.start(max_payload_bytes=..., limits=...)``)."""
        self.quotas = CallerQuotas()
        self._mailboxes = LiveMailboxes()
        self._live = self._mailboxes.table  # read on every post: one dict, no call
        self._last_values: dict[tuple[CrewId | None, str], Message] = {}
        self._subscriptions: set[MemorySubscription] = set()
        self._waits = HubWaits(self)  # blocked waiters and their kind, and the wait steps
        self.stopped = False
        """Whether :meth:`stop` ran (an attribute, not a property: every blocking wait reads it)."""
        scheduler.add_failure_listener(self._fail_pending)
        self.on_wait_timed_out: Callable[[Message], None] | None = None
        self.wait_observer: WaitObserver | None = None
        """Told when a wait starts and ends (:mod:`orkeon_actors.hub.observe`); ``None``
        costs nothing."""

        self._base_pipeline = self.pipeline
        self._compose_chains()

    def _compose_chains(self) -> None:
        """Compose, once, the chain of every operation from :attr:`pipeline`."""
        pipe = self.pipeline
        self._publish_chain = pipe.publish_chain("publish", self._route)
        self._topic_post_chain = pipe.publish_chain("post", self._route_topic_post)
        # Without a sent history the mailbox terminal is the append itself (a frame less
        # on every post and send: the hot path, issue 31).
        to_mailbox = self._append_to_mailbox if self._sent is None else self._deliver_to_mailbox
        self._post_chain = pipe.publish_chain("post", to_mailbox)
        self._send_chain = pipe.publish_chain("send", to_mailbox)
        self._reply_chain = pipe.publish_chain("reply", self._deliver_reply)
        self.receive_subscription: Next | None = pipe.receive_chain("subscribe")
        """The receive stages of subscriptions (``None``: none)."""
        self.receive_wait: Next | None = pipe.receive_chain("wait")
        """The receive stages of waits."""
        self.receive_reader: Next | None = pipe.receive_chain("receive")
        """The receive stages of held mailbox readers."""

    def set_tap(self, tap: EventHubMiddleware | None) -> None:
        """Put the observing stage ``tap`` in front of the middleware chain while the hub
        runs, or take it out again (``None``).

        For an observer that watches only at times (the Studio, while a browser is
        attached): the chains are recomposed, so without a tap the hub runs exactly the
        chain it was started with and pays nothing per message. A message already inside
        a chain finishes on the chain it entered. ``tap`` must pass every message on
        unchanged (it runs first, so it also sees what later stages refuse)."""
        base = self._base_pipeline
        self.pipeline = base if tap is None else Pipeline((tap, *base.stages))
        self._compose_chains()

    # -- message construction ---------------------------------------------------------

    def stamp(
        self,
        caller: CallerContext,
        topic: str,
        payload: object,
        metadata: Mapping[str, str] | None,
        target_crew_id: CrewId | None = None,
        target_mailbox: MailboxAddress | None = None,
        correlation_id: CorrelationId | None = None,
        schema_id: str | None = None,
    ) -> Message:
        """A new message from ``caller`` as the hub stamps it (its id, source and time;
        a unit of work stamps its outgoing messages here too). ``HubStoppedError`` once
        the hub stopped."""
        if self.stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime to send messages")
        return stamped_message(
            new_message_id(),
            topic,
            caller.crew_id,
            self.clock.now(),
            payload if type(payload) is bytes else encode_payload(payload),
            freeze_metadata(metadata),
            caller.agent_id,
            target_crew_id,
            target_mailbox,
            correlation_id,
            schema_id or NO_DECLARED_SCHEMA_ID,
        )

    # -- delivery terminals (the end of each publish chain) ---------------------------

    def _route(self, message: Message) -> Message:
        observer = self._observer
        if observer is None:
            self._router.route(message)
            return message
        observer.routing(message)
        try:
            self._router.route(message)
        finally:
            observer.dispatched(message)
        return message

    def _route_topic_post(self, message: Message) -> Message:
        """The end of a ``topic://`` post's chain: routed, and recorded in its sender's
        history when the sender is an agent (the recorder decides)."""
        if self._sent is not None:
            return self._sent.deliver(message, message.target_mailbox, None, self._route)
        return self._route(message)

    def _deliver_to_mailbox(self, message: Message) -> Message:
        if self._sent is not None:
            return self._sent.deliver(message, message.target_mailbox, None, self._append_to_mailbox)
        return self._append_to_mailbox(message)

    def _append_to_mailbox(self, message: Message) -> Message:
        if self._store is not None:
            self._store.append(message)
            return message
        address = message.target_mailbox
        handle = self._live.get(address) if address is not None else None
        if handle is None:
            raise MailboxNotFoundError(address)
        handle.deliver(message)
        return message

    def _keyed(
        self, operation: str, key: str, to: MailboxAddress | None, terminal: Callable[[Message], Message]
    ) -> Next:
        """The publish stages of ``operation`` ending in a keyed delivery (composed per
        call: only calls with an idempotency key pay for it)."""
        sent = self._sent
        if sent is None:
            raise SentHistoryUnavailableError(
                "idempotency_key needs the sent history of a durable store: Runtime.start(store=...)"
            )
        _check_key(key)
        return self.pipeline.publish_chain(operation, lambda m: sent.deliver(m, to, key, terminal))

    def _deliver_reply(self, message: Message) -> Message:
        assert message.correlation_id is not None
        self._replies.answer(message.correlation_id, message)
        if self._observer is not None:
            self._observer.dispatched(message)
        return message

    def consume(self, receive: Next | None, message: Message) -> Message | None:
        """Run the receive stages ``receive`` on a message handed to a consumer; ``None``
        when a stage dropped it. The mailbox store hears of it."""
        consumed: Message | None = message
        if receive is not None:
            try:
                consumed = receive(message)
            except DuplicateMessageError:
                logger.debug("dropped duplicate message {} at delivery", message.id)
                consumed = None
        if self._store is not None:
            self._store.consumed(message, consumed)
        return consumed

    # -- the collaborators' steps -------------------------------------------------------

    def _mailbox_exists(self, address: MailboxAddress) -> bool:
        """Whether a post or send to ``address`` is accepted; checked before the publish
        stages run: a live mailbox, or one the mailbox store keeps."""
        return address in self._live or (self._store is not None and self._store.exists(address))

    def mailbox_exists(self, address: MailboxAddress) -> bool:
        """:meth:`_mailbox_exists`, for a unit of work checking its posts."""
        return self._mailbox_exists(address)

    def reader_closed(self, handle: MailboxHandle) -> None:
        """A held reader of ``handle`` was closed (its registration's reader)."""
        if self._store is not None:
            self._store.reader_closed(handle)

    def receiving(self, address: MailboxAddress) -> None:
        """A consumer of ``address`` is about to receive from it (``wait_for``, a held
        reader's ``receive``), whatever that attempt's outcome: a durable mailbox store
        acknowledges the message it handed out before (docs/store.md)."""
        if self._store is not None:
            self._store.receiving(address)

    def crew_finished(self, crew_id: CrewId, status: str) -> None:
        """``crew_id`` finished (``status``: ``"completed"`` / ``"failed"``): a later post
        or send to one of its (closed) mailboxes raises ``MailboxNotFoundError`` saying
        so. The last :data:`~orkeon_actors.hub.live_mailboxes.FINISHED_CREWS_REMEMBERED`
        crews are remembered; a crew registering mailboxes under the same id again is
        forgotten."""
        self._mailboxes.crew_finished(crew_id, status)

    def _missing(self, address: MailboxAddress) -> MailboxNotFoundError:
        return self._mailboxes.missing(address)

    def _refuse_missing(self, operation: str, message: Message) -> NoReturn:
        """A post or send of ``message`` to a mailbox that does not exist: its publish
        stages run first, ending in ``MailboxNotFoundError``. So a caller a stage
        refuses (the ACL: the crew links forbid the target crew) gets that refusal, the
        same answer as for a live mailbox, and learns nothing of which mailboxes exist
        (issue 34; docs/security.md). Only this cold path pays for it."""
        address = message.target_mailbox
        assert address is not None

        def missing(m: Message) -> Message:
            raise self._missing(address)

        self.pipeline.publish_chain(operation, missing)(message)
        raise self._missing(address)  # a stage that passed nothing on still gets the answer

    def _retain(self, key: tuple[CrewId | None, str], message: Message) -> None:
        """Keep ``message`` as the last value under ``key`` (a publish with retain)."""
        if self._last_value_store is None:
            self._last_values[key] = message
            return
        scope, name = key
        self._last_value_store.retain(scope, name, message, lambda: self.remember_last_value(scope, name, message))

    def remember_last_value(self, scope: CrewId | None, key: str, message: Message) -> None:
        """Hold ``message`` in memory as the last value of ``(scope, key)`` (one the
        adapter already keeps durably: at boot, or an outbox publish)."""
        self._last_values[(scope, key)] = message

    # -- the port ---------------------------------------------------------------------

    def register_mailbox(self, address: MailboxAddress | str, owner: object = None) -> MailboxRegistration:
        [registration] = self._register([address], owner)
        return registration

    def client_mailbox_owner(self, address: MailboxAddress) -> CrewId | None:
        handle = self._mailboxes.get(address)
        owner = None if handle is None else handle.owner
        return owner if address.scheme is Scheme.CLIENT and isinstance(owner, CrewId) else None

    def register_mailboxes(
        self, addresses: Sequence[MailboxAddress | str], owner: object = None
    ) -> list[MailboxRegistration]:
        return self._register(addresses, owner)

    def _register(self, addresses: Sequence[MailboxAddress | str], owner: object) -> list[MailboxRegistration]:
        parsed = [MailboxAddress.parse(a) for a in addresses]
        for address in parsed:
            if address.scheme is Scheme.TOPIC:
                raise InvalidArgumentError(
                    f"{address} is an alias of a topic, not a mailbox: subscribe to {address.name!r} instead"
                )
        if len(set(parsed)) != len(parsed):
            raise InvalidArgumentError(f"register_mailboxes: an address is given twice in {[str(a) for a in parsed]}")
        if self.stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime")
        self._mailboxes.forget_finished(parsed)
        # Built before taking the lock (starting a mailbox actor is the slow part), so
        # registrations on other threads do not queue behind it.
        handles: list[MailboxHandle] = []
        try:
            for address in parsed:
                handles.append(MailboxHandle(address, owner))
        except BaseException:
            for handle in handles:
                handle.close()
            raise
        taken = self._mailboxes.claim(handles)
        if taken is not None:
            for handle in handles:
                handle.close()
            raise MailboxAlreadyRegisteredError(
                f"a mailbox is already registered at {taken}; close the existing registration first"
            )
        try:
            if self._store is not None:
                self._store.opened(handles)
        except BaseException:
            self._mailboxes.drop(handles)
            for handle in handles:
                handle.close()
            raise
        return [MemoryRegistration(self, handle) for handle in handles]

    def _handles(self, registrations: Sequence[MailboxRegistration]) -> list[MailboxHandle]:
        handles = []
        for registration in registrations:
            if not isinstance(registration, MemoryRegistration) or registration.hub is not self:
                raise TypeError(f"not a registration of this hub: {registration!r}")
            handles.append(registration.handle)
        return handles

    def close_mailboxes(self, registrations: Sequence[MailboxRegistration]) -> list[list[Message]]:
        return self._unregister_many(self._handles(registrations))

    def park_mailboxes(self, registrations: Sequence[MailboxRegistration]) -> None:
        """Release the live mailboxes of ``registrations``: the mailbox store keeps them
        (see :meth:`MailboxStore.park`); without one they are closed."""
        handles = self._handles(registrations)
        if self._store is None:
            self._unregister_many(handles)
        else:
            self._store.park(handles, self._unlive)

    def _unlive(self, handle: MailboxHandle) -> None:
        self._mailboxes.drop([handle])

    def unregister(self, handle: MailboxHandle) -> list[Message]:
        """Close one registration (:meth:`MailboxRegistration.close`)."""
        [leftovers] = self._unregister_many([handle])
        return leftovers

    def _unregister_many(self, handles: Sequence[MailboxHandle]) -> list[list[Message]]:
        if self._store is not None:
            return self._store.unregister(handles, self._close_live)
        return self._close_live(handles)

    def _close_live(self, handles: Sequence[MailboxHandle]) -> list[list[Message]]:
        """Unregister ``handles`` live; each one's unconsumed messages (after this,
        nothing reaches them live)."""
        self._mailboxes.drop(handles)
        return [handle.close() for handle in handles]

    def publish(
        self, caller: CallerContext, topic: str, payload: object, options: PublishOptions, cancel: CancelToken | None
    ) -> Message:
        if cancel is not None:
            cancel.raise_if_cancelled()
        message = self.stamp(
            caller, topic, payload, options.metadata, options.target_crew_id, None, None, options.schema_id
        )
        if not options.retain_as_last_value:
            return self._publish_chain(message)
        key = (options.target_crew_id, options.last_value_key or "")

        def retain_and_route(m: Message) -> Message:
            self._retain(key, m)
            return self._route(m)

        return self.pipeline.publish_chain("publish", retain_and_route)(message)

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
        if cancel is not None:
            cancel.raise_if_cancelled()
        if to.scheme is Scheme.TOPIC:
            message = self.stamp(caller, to.name or "", payload, metadata, None, to)
            if idempotency_key is not None:
                return self._keyed("post", idempotency_key, to, self._route)(message)
            return self._topic_post_chain(message)
        if to not in self._live and not self._mailbox_exists(to):  # a live one: no call
            self._refuse_missing("post", self.stamp(caller, POST_TOPIC, payload, metadata, to.crew_id, to))
        chain = (
            self._post_chain
            if idempotency_key is None
            else self._keyed("post", idempotency_key, to, self._append_to_mailbox)
        )
        return chain(self.stamp(caller, POST_TOPIC, payload, metadata, to.crew_id, to))

    def post_nowait(
        self, caller: CallerContext, to: MailboxAddress, payload: object, metadata: Mapping[str, str] | None
    ) -> Future[Message]:
        store = self._store
        if store is None or to.scheme is Scheme.TOPIC:
            return super().post_nowait(caller, to, payload, metadata)
        return store.post_nowait(lambda: self.post(caller, to, payload, metadata, None))

    def _open_request(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        timeout: float,
        metadata: Mapping[str, str] | None,
        listener: Waiter[Message] | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[Message, PendingRequest]:
        if to.scheme is Scheme.TOPIC:
            raise InvalidArgumentError(
                f"cannot send a request to {to}: a topic has no single recipient to reply; "
                "send to an agent://, crew:// or client:// mailbox"
            )
        if to not in self._live and not self._mailbox_exists(to):  # a live one: no call
            stamped = self.stamp(caller, SEND_TOPIC, payload, metadata, to.crew_id, to, CorrelationId.new())
            self._refuse_missing("send", stamped)
        correlation_id = new_correlation_id()
        request = PendingRequest(correlation_id, caller.crew_id, to, listener, caller.agent_id)
        message = self.stamp(caller, SEND_TOPIC, payload, metadata, to.crew_id, to, correlation_id)
        self._replies.open(request, self.limits.max_pending_requests)
        if listener is not None and idempotency_key is None and self._times_own_waits:
            # A blocking send on the system clock: its caller's thread times the wait
            # itself (HubWaits.block), no timer goes through the scheduler (issue 31).
            request.deadline = monotonic() + timeout
        else:
            request.deadline = self.clock.monotonic() + timeout
            request.timer = self.scheduler.schedule_at(
                request.deadline, lambda: self._replies.expire(correlation_id, timeout)
            )
        try:
            if idempotency_key is None:
                self._send_chain(message)
                return message, request
            sent = self._keyed("send", idempotency_key, to, self._append_to_mailbox)(message)
        except BaseException:
            self._replies.forget(correlation_id)
            raise
        if sent.id == message.id or sent.correlation_id is None:
            return sent, request
        return sent, self._await_original(sent.correlation_id, caller, to, timeout, listener, correlation_id)

    def _await_original(
        self,
        original: CorrelationId,
        caller: CallerContext,
        to: MailboxAddress,
        timeout: float,
        listener: Waiter[Message] | None,
        replaced: CorrelationId,
    ) -> PendingRequest:
        """A keyed request replayed: its original stands (the recipient holds it, with
        its correlation id), so the caller waits for the original's reply instead."""
        self._replies.forget(replaced)
        request = self._replies.get(original)
        if request is not None:
            if listener is not None:
                request.listen(listener)
            return request
        request = PendingRequest(original, caller.crew_id, to, listener, caller.agent_id)
        self._replies.open(request, self.limits.max_pending_requests)
        request.deadline = self.clock.monotonic() + timeout
        request.timer = self.scheduler.schedule_at(request.deadline, lambda: self._replies.expire(original, timeout))
        return request

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
        if cancel is not None:
            cancel.raise_if_cancelled()
        message, _ = self._open_request(caller, to, payload, timeout, metadata, None, idempotency_key)
        return message

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
        if cancel is not None:
            cancel.raise_if_cancelled()
        waiter: Waiter[Message] = Waiter()
        _, request = self._open_request(caller, to, payload, timeout, metadata, waiter, idempotency_key)
        try:
            if request.timer is None and request.deadline is not None:  # timed here, by its deadline
                expire = functools.partial(self._replies.expire_request, request, timeout)
                return self._waits.block(waiter, "on_reply", cancel, request.deadline, expire)
            return self._waits.block(waiter, "on_reply", cancel)  # not via self.block: a frame less
        except CancelledError:
            cancelled = self.on_send_cancelled
            if cancelled is not None:
                cancelled(request.correlation_id, to)
            raise
        finally:
            self._replies.forget(request.correlation_id)

    def expect_reply(self, request: PendingRequest, timeout: float) -> None:
        """Open ``request``, one that reached this hub from elsewhere (another host's
        gateway delivered it), so that a local ``reply`` answers it exactly as it would a
        local request (same replier check, same reply stages): its listeners hear the
        reply, or a ``SendTimeoutError`` after ``timeout`` seconds. The caller forgets it
        (:meth:`forget_request`) once it was answered."""
        self._replies.open(request)
        correlation_id = request.correlation_id
        request.deadline = self.clock.monotonic() + timeout
        request.timer = self.scheduler.schedule_at(
            request.deadline, lambda: self._replies.expire(correlation_id, timeout)
        )

    def pending_request(self, correlation_id: CorrelationId) -> PendingRequest | None:
        """The request awaiting a reply under ``correlation_id`` (its ``timer`` holds its
        deadline), or ``None``."""
        return self._replies.get(correlation_id)

    def answer(self, message: Message) -> Message:
        """Hand ``message``, a reply stamped elsewhere (another host), to its pending
        request: the reply terminal alone, its stages ran where it was stamped. Raises
        ``UnknownCorrelationError`` if the request is not pending any more."""
        return self._deliver_reply(message)

    def forget_request(self, correlation_id: CorrelationId) -> None:
        """Withdraw a pending request (its requester gave up waiting): a later reply
        is refused with ``UnknownCorrelationError``. Unknown ids are ignored."""
        self._replies.forget(correlation_id)

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
        if cancel is not None:
            cancel.raise_if_cancelled()
        try:
            request = self._replies.require_active(correlation_id, caller)
        except UnknownCorrelationError as unknown:
            if idempotency_key is None or self._sent is None or caller.agent_id is None:
                raise
            return self._replay_reply(caller, correlation_id, payload, metadata, idempotency_key, unknown)
        message = self.stamp(caller, REPLY_TOPIC, payload, metadata, request.requester_crew, None, correlation_id)
        agent = request.requester_agent
        # A reply to the system or to a service principal (a requester with no agent: a
        # crew-level client, a client:// peer) belongs to that request, not to the
        # replier's sent history (MESSAGE-R11).
        if self._sent is None or caller.agent_id is None or agent is None or request.requester_crew.is_system:
            if idempotency_key is not None:
                raise SentHistoryUnavailableError(
                    "idempotency_key needs the sent history of an agent: reply from a client bound to an agent "
                    "(hub.bind(crew, agent)) on a durable store (Runtime.start(store=...)) to a request of an "
                    "agent (a reply to the system or to a crew-level requester is in no sent history)"
                )
            return self._reply_chain(message)
        requester = MailboxAddress.agent(request.requester_crew, agent)
        if idempotency_key is not None:
            return self._keyed("reply", idempotency_key, requester, self._deliver_reply)(message)
        sent = self._sent
        return self.pipeline.publish_chain("reply", lambda m: sent.deliver(m, requester, None, self._deliver_reply))(
            message
        )

    def _replay_reply(
        self,
        caller: CallerContext,
        correlation_id: CorrelationId,
        payload: object,
        metadata: Mapping[str, str] | None,
        key: str,
        unknown: UnknownCorrelationError,
    ) -> Message:
        """A keyed reply to a request no longer pending: the replier's original reply
        under ``key`` (through the reply's stages, as any keyed retry), else ``unknown``."""
        sent = self._sent
        assert sent is not None
        _check_key(key)

        def original(message: Message) -> Message:
            replayed = sent.replay_reply(message, key)
            if replayed is None:
                raise unknown
            return replayed

        message = self.stamp(caller, REPLY_TOPIC, payload, metadata, None, None, correlation_id)
        return self.pipeline.publish_chain("reply", original)(message)

    def subscribe(
        self,
        caller: CallerContext,
        pattern: str,
        cancel: CancelToken | None,
        *,
        metadata_match: FrozenMap | None = None,
        max_buffered: int | None = None,
    ) -> Subscription:
        if self.stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime")
        if cancel is not None:
            cancel.raise_if_cancelled()
        release = self.quotas.acquire("max_subscriptions", self.limits.max_subscriptions, caller)
        subscription = MemorySubscription(
            self, pattern, caller.crew_id, self.receive_subscription, metadata_match, max_buffered
        )
        subscription.on_close = release
        self._subscriptions.add(subscription)
        self._router.add(subscription)
        if cancel is not None:
            cancel.on_cancel(lambda _error: subscription.close())
        return subscription

    def wait_for(
        self, caller: CallerContext, descriptor: WaitDescriptor, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> Message:
        return self._waits.wait_for(caller, descriptor, timeout, cancel)

    def lease(
        self, caller: CallerContext, address: MailboxAddress, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> MailboxLease:
        return self._waits.lease(caller, address, timeout, cancel)  # hub/leases.py

    def register_wait(
        self, caller: CallerContext, descriptor: WaitDescriptor, waiter: Waiter[Message]
    ) -> WaitRegistration:
        """Register ``waiter`` where ``descriptor``'s message will arrive: the topic
        router, the mailbox actor, or the pending request. The blocking ``wait_for`` and
        the non-blocking waits of :mod:`orkeon_actors.hub.async_wait` share this step.

        A reply wait is hooked up by ``registration.listen()`` (an already answered
        request settles the waiter at once, so the caller first finishes its own setup).
        Raises ``MailboxNotFoundError`` / ``UnknownCorrelationError``.
        """
        return self._waits.register_wait(caller, descriptor, waiter)

    def expire_wait(
        self, waiter: Waiter[Message], caller: CallerContext, original: str, wait_id: str, started_at: object
    ) -> None:
        """Settle ``waiter`` with a wait-timed-out message (its deadline passed)."""
        self._waits.expire_wait(waiter, caller, original, wait_id, started_at)

    def block(self, waiter: Waiter[Message], kind: str, cancel: CancelToken | None) -> Message:
        """Block the calling thread on ``waiter``, honouring ``cancel`` and hub stop."""
        return self._waits.block(waiter, kind, cancel)

    def get_last_value(
        self, caller: CallerContext, key: str, crew_scope: CrewId | None, cancel: CancelToken | None
    ) -> Message | None:
        if cancel is not None:
            cancel.raise_if_cancelled()
        gate = self.before_last_value_read
        if gate is not None:
            gate()
        return self.last_value_held(key, crew_scope)

    def last_value_held(self, key: str, crew_scope: CrewId | None) -> Message | None:
        """The last value this hub holds for ``(crew_scope, key)``, read without the
        ACL, the cancel check or :attr:`before_last_value_read` (for collaborators that
        merge values from elsewhere)."""
        return self._last_values.get((crew_scope, key))

    def is_active_correlation(self, correlation_id: CorrelationId) -> bool:
        return self._replies.is_active(correlation_id)

    def name_crew(self, crew_id: CrewId, name: str) -> Callable[[], None]:
        return self.crew_names.name(crew_id, name)

    def crew_name(self, crew_id: CrewId | None) -> str | None:
        return self.crew_names.name_of(crew_id)

    def pending_waits(self) -> dict[str, int]:
        return self._waits.pending_waits()

    def mailbox_registered(self, address: MailboxAddress | str) -> bool:
        return MailboxAddress.parse(address) in self._mailboxes

    # -- the core's protocol with its handles and the non-blocking waits --------------------

    @property
    def router(self) -> TopicRouter:
        return self._router

    def forget_subscription(self, subscription: Subscription) -> None:
        """A subscription of this hub closed."""
        self._subscriptions.discard(subscription)

    def track_waiter(self, waiter: Waiter[Message], kind: str) -> None:
        """Count ``waiter`` in :meth:`pending_waits` (and fail it at stop) until untracked."""
        self._waits.track_waiter(waiter, kind)

    def untrack_waiter(self, waiter: Waiter[Message]) -> None:
        self._waits.untrack_waiter(waiter)

    def live_mailbox(self, address: MailboxAddress) -> MailboxHandle | None:
        """The live mailbox at ``address`` here, if any."""
        return self._mailboxes.get(address)

    def live_mailboxes(self) -> list[MailboxHandle]:
        """Every live mailbox here."""
        return self._mailboxes.handles()

    def _fail_pending(self, error: SchedulerFailedError) -> None:
        """Fail every blocked ``wait_for`` / ``receive`` and every pending ``send`` with
        a copy of ``error`` each (the timer thread's death)."""

        def own_copy() -> SchedulerFailedError:
            copy = SchedulerFailedError(*error.args)
            copy.__cause__ = error.__cause__
            return copy

        self._waits.fail_all(own_copy)
        self._replies.fail_all(own_copy)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._waits.fail_all(lambda: HubStoppedError("the runtime was stopped while waiting"))
        self._replies.fail_all(lambda: HubStoppedError("the runtime was stopped before the reply arrived"))
        for subscription in list(self._subscriptions):
            subscription.close()
        self._router.clear()  # and its match cache: nothing of it outlives the hub
        for handle in self._mailboxes.clear():
            handle.close()


def note_crew_finished(hub: EventHub, crew_id: CrewId, status: str) -> None:
    """Tell ``hub`` that ``crew_id`` finished (see ``HubCore.crew_finished``);
    a no-op for an adapter that does not explain refused posts."""
    if isinstance(hub, HubCore):
        hub.crew_finished(crew_id, status)


class InMemoryEventHub(HubCore):
    """The in-memory adapter: the hub core with no collaborators (nothing outlives the
    process). Thread-safe; create it through ``Runtime.start()``."""
