"""The in-memory adapter of the EventHub port: every mailbox is a pykka actor.

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

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

import attrs
from loguru import logger

from orkeon_actors.errors import (
    DuplicateMessageError,
    EventHubError,
    HubStoppedError,
    InvalidArgumentError,
    MailboxAlreadyRegisteredError,
    MailboxNotFoundError,
    UnknownCorrelationError,
)
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.hub.observe import WaitObserver, wait_info
from orkeon_actors.hub.pipeline import EventHubMiddleware, Next, Pipeline
from orkeon_actors.hub.port import CallerContext, EventHub, MailboxReader, MailboxRegistration, Subscription
from orkeon_actors.hub.replies import PendingReplies, PendingRequest
from orkeon_actors.hub.routing import TopicRouter
from orkeon_actors.hub.scheduler import Scheduler, TimerHandle
from orkeon_actors.hub.waiter import BufferClosed, LocalBuffer, Waiter
from orkeon_actors.model.address import MailboxAddress, Scheme
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import CorrelationId, CrewId, MessageId, new_ulid_str
from orkeon_actors.model.message import (
    NO_DECLARED_SCHEMA_ID,
    FrozenMap,
    Message,
    encode_payload,
    freeze_metadata,
)
from orkeon_actors.model.options import (
    ForeverWaitTimeout,
    PublishOptions,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
    coerce_wait_timeout,
)

__all__ = ["InMemoryEventHub", "POST_TOPIC", "SEND_TOPIC", "REPLY_TOPIC"]

POST_TOPIC = "_system.post"
"""Synthetic topic of mailbox posts: no agent can publish on ``_system.*`` (spec §10.2)."""
SEND_TOPIC = "_system.send"
REPLY_TOPIC = "_system.reply"

WAIT_KINDS = ("on_topic", "on_mailbox", "on_reply")


class _TopicWait:
    """A one-shot router entry: the first matching message settles the wait."""

    __slots__ = ("crew_id", "metadata_match", "pattern", "waiter")

    def __init__(self, pattern: str, crew_id: CrewId, metadata_match: FrozenMap | None, waiter: Waiter[Message]):
        self.pattern = pattern
        self.crew_id = crew_id
        self.metadata_match = metadata_match
        self.waiter = waiter

    def offer(self, message: Message) -> None:
        self.waiter.try_complete(message)


@attrs.frozen
class WaitRegistration:
    """Where a waiter was registered: its ``kind`` (``on_topic`` / ``on_mailbox`` /
    ``on_reply``), the ``original`` name reported by a timeout (§9.2), how to undo the
    registration, and how to start listening (reply waits only; a no-op otherwise)."""

    kind: str
    original: str
    cleanup: Callable[[], None]
    listen: Callable[[], None] = lambda: None


class _MemorySubscription(Subscription):
    __slots__ = ("_buffer", "_hub", "_receive", "crew_id", "metadata_match", "pattern")

    def __init__(
        self,
        hub: InMemoryEventHub,
        pattern: str,
        crew_id: CrewId,
        receive: Next | None,
        metadata_match: FrozenMap | None = None,
        max_buffered: int | None = None,
    ) -> None:
        self.pattern = pattern
        self.crew_id = crew_id
        self.metadata_match: FrozenMap | None = metadata_match or None
        self._buffer: LocalBuffer[Message] = LocalBuffer(max_buffered)
        self._hub = hub
        self._receive = receive

    def offer(self, message: Message) -> None:
        self._buffer.push(message)

    def __next__(self) -> Message:
        while True:
            try:
                message = self._buffer.take()
            except BufferClosed:
                raise StopIteration from None
            consumed = self._hub._consume(self._receive, message)
            if consumed is not None:
                return consumed

    def drain(self) -> list[Message]:
        out = []
        while (message := self._buffer.take_nowait()) is not None:
            consumed = self._hub._consume(self._receive, message)
            if consumed is not None:
                out.append(consumed)
        return out

    def poll(self) -> Message | None:
        while (message := self._buffer.take_nowait()) is not None:
            consumed = self._hub._consume(self._receive, message)
            if consumed is not None:
                return consumed
        return None

    def inject(self, message: Message) -> None:
        self._buffer.push(message)

    def pending(self) -> list[Message]:
        return self._buffer.peek_all()

    def receive(self, timeout: WaitTimeout | float | int | timedelta, *, cancel: CancelToken | None = None) -> Message:
        hub = self._hub
        wait_timeout = coerce_wait_timeout(timeout)
        if cancel is not None:
            cancel.raise_if_cancelled()
        clock = hub.clock
        deadline = None if isinstance(wait_timeout, ForeverWaitTimeout) else clock.monotonic() + wait_timeout.seconds
        wait_id = new_ulid_str()
        started_at = clock.now()
        while True:
            message = self._take_before(deadline, wait_id, started_at, cancel)
            if message.is_timeout:
                return message
            consumed = hub._consume(self._receive, message)
            if consumed is not None:
                return consumed

    def _take_before(
        self, deadline: float | None, wait_id: str, started_at: datetime, cancel: CancelToken | None
    ) -> Message:
        """The oldest buffered message, else block (a registered ``on_topic`` wait) for
        the next one, the timeout at ``deadline``, a cancellation or a close."""
        hub = self._hub
        waiter: Waiter[Message] = Waiter()
        try:
            message = self._buffer.take_or_park(waiter)
        except BufferClosed:
            raise self._closed_error() from None
        if message is not None:
            return message
        timer: TimerHandle | None = None
        if deadline is not None:
            caller = CallerContext(self.crew_id)
            timer = hub.scheduler.schedule_at(
                deadline, lambda: hub._expire_wait(waiter, caller, self.pattern, wait_id, started_at)
            )
        try:
            return hub._block(waiter, "on_topic", cancel)
        except BufferClosed:
            raise self._closed_error() from None
        finally:
            if timer is not None:
                timer.cancel()
            self._buffer.unpark(waiter)

    def _closed_error(self) -> EventHubError:
        if self._hub._stopped:
            return HubStoppedError("the runtime was stopped while waiting")
        return InvalidArgumentError(
            f"the subscription to {self.pattern!r} is closed; subscribe again to receive more messages"
        )

    @property
    def dropped(self) -> int:
        return self._buffer.dropped

    def close(self) -> None:
        self._hub._router.remove(self)
        self._buffer.close()
        self._hub._subscriptions.discard(self)

    @property
    def closed(self) -> bool:
        return self._buffer.closed

    def __repr__(self) -> str:
        return f"Subscription({self.pattern!r}, crew={self.crew_id!s}, buffered={len(self._buffer)})"


class _MemoryReader(MailboxReader):
    def __init__(self, handle: MailboxHandle, hub: InMemoryEventHub) -> None:
        self._handle = handle
        self._hub = hub
        self._buffer: LocalBuffer[Message] = LocalBuffer()
        handle.attach(self._buffer)

    def receive(self, cancel: CancelToken | None = None) -> Message:
        unregister = cancel.on_cancel(self._buffer.interrupt) if cancel is not None else None
        try:
            while True:
                try:
                    message = self._buffer.take()
                except BufferClosed:
                    if self._handle.closed:
                        raise MailboxNotFoundError(self._handle.address) from None
                    raise InvalidArgumentError(
                        "this mailbox reader was closed; open a new one with reg.reader()"
                    ) from None
                consumed = self._hub._consume(self._hub._receive_reader, message)
                if consumed is not None:
                    return consumed
        finally:
            if unregister is not None:
                unregister()
                self._buffer.clear_interrupt()

    def __next__(self) -> Message:
        try:
            return self.receive()
        except (MailboxNotFoundError, InvalidArgumentError):
            raise StopIteration from None

    def close(self) -> None:
        self._handle.detach(self._buffer)
        self._hub._reader_closed(self._handle)


class _MemoryRegistration(MailboxRegistration):
    def __init__(self, hub: InMemoryEventHub, handle: MailboxHandle) -> None:
        self._hub = hub
        self._handle = handle
        self.address = handle.address

    def reader(self) -> MailboxReader:
        return _MemoryReader(self._handle, self._hub)

    def depth(self) -> int:
        return self._handle.depth()

    def close(self) -> list[Message]:
        return self._hub._unregister(self._handle)

    def __repr__(self) -> str:
        return f"MailboxRegistration({str(self.address)!r})"


class InMemoryEventHub(EventHub):
    """The in-memory adapter. Thread-safe; create it through ``Runtime.start()``."""

    def __init__(self, clock: Clock, scheduler: Scheduler, pipeline: Pipeline | None = None) -> None:
        self.clock = clock
        self.scheduler = scheduler
        self.pipeline = pipeline or Pipeline()
        self._router = TopicRouter()
        self._replies = PendingReplies()
        self._mailboxes: dict[MailboxAddress, MailboxHandle] = {}
        self._mailboxes_lock = threading.Lock()
        self._last_values: dict[tuple[CrewId | None, str], Message] = {}
        self._subscriptions: set[_MemorySubscription] = set()
        # Blocked waiters and their kind. Single dict operations are atomic, so the hot
        # path takes no lock; pending_waits() counts a snapshot.
        self._active_waiters: dict[Waiter[Message], str] = {}
        self._stopped = False
        self.on_wait_timed_out: Callable[[Message], None] | None = None
        self.wait_observer: WaitObserver | None = None
        """Told when a wait starts and ends (:mod:`orkeon_actors.hub.observe`); ``None``
        costs nothing."""
        self.inline_mailboxes = False
        """Mailboxes registered from now on run their logic on the caller's thread (no
        actor): what a deterministic :class:`~orkeon_actors.sim.Simulation` sets."""

        self._base_pipeline = self.pipeline
        self._compose_chains()

    def _compose_chains(self) -> None:
        """Compose, once, the chain of every operation from :attr:`pipeline`."""
        pipe = self.pipeline
        self._publish_chain = pipe.publish_chain("publish", self._route)
        self._topic_post_chain = pipe.publish_chain("post", self._route)
        self._post_chain = pipe.publish_chain("post", self._deliver_to_mailbox)
        self._send_chain = pipe.publish_chain("send", self._deliver_to_mailbox)
        self._reply_chain = pipe.publish_chain("reply", self._deliver_reply)
        self._receive_subscription = pipe.receive_chain("subscribe")
        self._receive_wait = pipe.receive_chain("wait")
        self._receive_reader = pipe.receive_chain("receive")

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

    def _stamp(
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
        if self._stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime to send messages")
        return Message(
            MessageId.new(),
            topic,
            caller.crew_id,
            self.clock.now(),
            encode_payload(payload),
            freeze_metadata(metadata),
            caller.agent_id,
            target_crew_id,
            target_mailbox,
            correlation_id,
            schema_id or NO_DECLARED_SCHEMA_ID,
        )

    # -- delivery terminals (the end of each publish chain) ---------------------------

    def _route(self, message: Message) -> Message:
        self._router.route(message)
        return message

    def _deliver_to_mailbox(self, message: Message) -> Message:
        address = message.target_mailbox
        handle = self._mailboxes.get(address) if address is not None else None
        if handle is None:
            raise MailboxNotFoundError(address)
        handle.deliver(message)
        return message

    def _deliver_reply(self, message: Message) -> Message:
        assert message.correlation_id is not None
        self._replies.answer(message.correlation_id, message)
        return message

    def _consume(self, receive: Next | None, message: Message) -> Message | None:
        """Run the receive stages; ``None`` when a stage dropped the message."""
        if receive is None:
            return message
        try:
            return receive(message)
        except DuplicateMessageError:
            logger.debug("dropped duplicate message {} at delivery", message.id)
            return None

    # -- hooks for durable adapters (plain in-memory behaviour here) --------------------

    def _mailbox_exists(self, address: MailboxAddress) -> bool:
        """Whether a post or send to ``address`` is accepted; checked before the publish
        stages run. In memory: a mailbox is registered at ``address``."""
        return address in self._mailboxes

    def _mailbox_opened(self, handle: MailboxHandle) -> None:
        """Called by ``register_mailbox`` once ``handle`` is registered, before the
        registration is returned. Raising undoes the registration."""

    def _mailboxes_opened(self, handles: Sequence[MailboxHandle]) -> None:
        """Called by ``register_mailboxes`` once every one of ``handles`` is registered,
        before the registrations are returned. Raising undoes all of them. Default:
        :meth:`_mailbox_opened` for each."""
        for handle in handles:
            self._mailbox_opened(handle)

    def _reader_closed(self, handle: MailboxHandle) -> None:
        """Called each time a held reader of ``handle`` is closed."""

    def _retain(self, key: tuple[CrewId | None, str], message: Message) -> None:
        """Keep ``message`` as the last value under ``key`` (a publish with retain)."""
        self._last_values[key] = message

    # -- the port ---------------------------------------------------------------------

    def register_mailbox(self, address: MailboxAddress | str, owner: object = None) -> MailboxRegistration:
        [registration] = self._register([address], owner, batch=False)
        return registration

    def register_mailboxes(
        self, addresses: Sequence[MailboxAddress | str], owner: object = None
    ) -> list[MailboxRegistration]:
        return self._register(addresses, owner, batch=True)

    def _register(
        self, addresses: Sequence[MailboxAddress | str], owner: object, *, batch: bool
    ) -> list[MailboxRegistration]:
        parsed = [MailboxAddress.parse(a) for a in addresses]
        for address in parsed:
            if address.scheme is Scheme.TOPIC:
                raise InvalidArgumentError(
                    f"{address} is an alias of a topic, not a mailbox: subscribe to {address.name!r} instead"
                )
        if len(set(parsed)) != len(parsed):
            raise InvalidArgumentError(f"register_mailboxes: an address is given twice in {[str(a) for a in parsed]}")
        if self._stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime")
        # Built before taking the lock (starting a mailbox actor is the slow part), so
        # registrations on other threads do not queue behind it.
        handles: list[MailboxHandle] = []
        try:
            for address in parsed:
                handles.append(MailboxHandle(address, owner, inline=self.inline_mailboxes))
        except BaseException:
            for handle in handles:
                handle.close()
            raise
        with self._mailboxes_lock:
            taken = next((address for address in parsed if address in self._mailboxes), None)
            if taken is None:
                for handle in handles:
                    self._mailboxes[handle.address] = handle
        if taken is not None:
            for handle in handles:
                handle.close()
            raise MailboxAlreadyRegisteredError(
                f"a mailbox is already registered at {taken}; close the existing registration first"
            )
        try:
            if batch:
                self._mailboxes_opened(handles)
            else:
                self._mailbox_opened(handles[0])
        except BaseException:
            with self._mailboxes_lock:
                for handle in handles:
                    if self._mailboxes.get(handle.address) is handle:
                        del self._mailboxes[handle.address]
            for handle in handles:
                handle.close()
            raise
        return [_MemoryRegistration(self, handle) for handle in handles]

    def close_mailboxes(self, registrations: Sequence[MailboxRegistration]) -> list[list[Message]]:
        handles = []
        for registration in registrations:
            handle = getattr(registration, "_handle", None)
            if not isinstance(handle, MailboxHandle) or getattr(registration, "_hub", None) is not self:
                raise TypeError(f"not a registration of this hub: {registration!r}")
            handles.append(handle)
        return self._unregister_many(handles)

    def _unregister(self, handle: MailboxHandle) -> list[Message]:
        [leftovers] = self._unregister_many([handle])
        return leftovers

    def _unregister_many(self, handles: Sequence[MailboxHandle]) -> list[list[Message]]:
        """Unregister ``handles``; each one's unconsumed messages. A durable adapter
        extends it (after this, nothing reaches them live)."""
        with self._mailboxes_lock:
            for handle in handles:
                if self._mailboxes.get(handle.address) is handle:
                    del self._mailboxes[handle.address]
        return [handle.close() for handle in handles]

    def publish(
        self, caller: CallerContext, topic: str, payload: object, options: PublishOptions, cancel: CancelToken | None
    ) -> Message:
        if cancel is not None:
            cancel.raise_if_cancelled()
        message = self._stamp(
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
    ) -> Message:
        if cancel is not None:
            cancel.raise_if_cancelled()
        if to.scheme is Scheme.TOPIC:
            message = self._stamp(caller, to.name or "", payload, metadata, None, to)
            return self._topic_post_chain(message)
        if not self._mailbox_exists(to):
            raise MailboxNotFoundError(to)
        return self._post_chain(self._stamp(caller, POST_TOPIC, payload, metadata, to.crew_id, to))

    def _open_request(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        timeout: float,
        metadata: Mapping[str, str] | None,
        listener: Waiter[Message] | None = None,
    ) -> tuple[Message, PendingRequest]:
        if to.scheme is Scheme.TOPIC:
            raise InvalidArgumentError(
                f"cannot send a request to {to}: a topic has no single recipient to reply; "
                "send to an agent://, crew:// or client:// mailbox"
            )
        if not self._mailbox_exists(to):
            raise MailboxNotFoundError(to)
        correlation_id = CorrelationId.new()
        request = PendingRequest(correlation_id, caller.crew_id, to, listener)
        message = self._stamp(caller, SEND_TOPIC, payload, metadata, to.crew_id, to, correlation_id)
        self._replies.open(request)
        request.timer = self.scheduler.schedule_in(timeout, lambda: self._replies.expire(correlation_id, timeout))
        try:
            self._send_chain(message)
        except BaseException:
            self._replies.forget(correlation_id)
            raise
        return message, request

    def request(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        timeout: float,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
    ) -> Message:
        if cancel is not None:
            cancel.raise_if_cancelled()
        message, _ = self._open_request(caller, to, payload, timeout, metadata)
        return message

    def send(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        timeout: float,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
    ) -> Message:
        if cancel is not None:
            cancel.raise_if_cancelled()
        waiter: Waiter[Message] = Waiter()
        _, request = self._open_request(caller, to, payload, timeout, metadata, waiter)
        try:
            return self._block(waiter, "on_reply", cancel)
        finally:
            self._replies.forget(request.correlation_id)

    def reply(
        self,
        caller: CallerContext,
        correlation_id: CorrelationId,
        payload: object,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
    ) -> Message:
        if cancel is not None:
            cancel.raise_if_cancelled()
        request = self._replies.require_active(correlation_id)
        message = self._stamp(caller, REPLY_TOPIC, payload, metadata, request.requester_crew, None, correlation_id)
        return self._reply_chain(message)

    def subscribe(
        self,
        caller: CallerContext,
        pattern: str,
        cancel: CancelToken | None,
        *,
        metadata_match: FrozenMap | None = None,
        max_buffered: int | None = None,
    ) -> Subscription:
        if self._stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime")
        if cancel is not None:
            cancel.raise_if_cancelled()
        subscription = _MemorySubscription(
            self, pattern, caller.crew_id, self._receive_subscription, metadata_match, max_buffered
        )
        self._subscriptions.add(subscription)
        self._router.add(subscription)
        if cancel is not None:
            cancel.on_cancel(lambda _error: subscription.close())
        return subscription

    def wait_for(
        self, caller: CallerContext, descriptor: WaitDescriptor, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> Message:
        if self._stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime")
        if cancel is not None:
            cancel.raise_if_cancelled()
        deadline = None if isinstance(timeout, ForeverWaitTimeout) else self.clock.monotonic() + timeout.seconds
        wait_id = new_ulid_str()
        started_at = self.clock.now()
        receive = self._receive_wait
        while True:
            message = self._wait_once(caller, descriptor, deadline, wait_id, started_at, cancel)
            if message.is_timeout or isinstance(descriptor, WaitOnReply):
                return message
            consumed = self._consume(receive, message)
            if consumed is not None:
                return consumed

    def _register_wait(
        self, caller: CallerContext, descriptor: WaitDescriptor, waiter: Waiter[Message]
    ) -> WaitRegistration:
        """Register ``waiter`` where ``descriptor``'s message will arrive: the topic
        router, the mailbox actor, or the pending request. The blocking ``wait_for`` and
        the non-blocking waits of :mod:`orkeon_actors.hub.async_wait` share this step.

        A reply wait is hooked up by ``registration.listen()`` (an already answered
        request settles the waiter at once, so the caller first finishes its own setup).
        Raises ``MailboxNotFoundError`` / ``UnknownCorrelationError``.
        """
        if isinstance(descriptor, WaitOnTopic):
            entry = _TopicWait(descriptor.topic, caller.crew_id, descriptor.metadata_match, waiter)
            self._router.add(entry)
            return WaitRegistration("on_topic", descriptor.topic, lambda: self._router.remove(entry))
        if isinstance(descriptor, WaitOnMailbox):
            handle = self._mailboxes.get(descriptor.address)
            if handle is None:
                raise MailboxNotFoundError(descriptor.address)
            handle.add_waiter(waiter)
            return WaitRegistration("on_mailbox", str(descriptor.address), lambda: handle.remove_waiter(waiter))
        correlation = descriptor.correlation
        request = self._replies.get(correlation)
        if request is None:
            raise UnknownCorrelationError(
                f"no request with correlation id {correlation} is pending; "
                "wait on the correlation_id of a request you started with request()"
            )

        def cleanup() -> None:
            request.unlisten(waiter)
            settled, value, _ = waiter.peek()
            if settled and value is not None and not value.is_timeout:
                self._replies.forget(correlation)  # the reply was consumed

        return WaitRegistration("on_reply", str(correlation), cleanup, lambda: request.listen(waiter))

    def _wait_once(
        self,
        caller: CallerContext,
        descriptor: WaitDescriptor,
        deadline: float | None,
        wait_id: str,
        started_at: datetime,
        cancel: CancelToken | None,
    ) -> Message:
        waiter: Waiter[Message] = Waiter()
        registration = self._register_wait(caller, descriptor, waiter)
        registration.listen()
        kind, original, cleanup = registration.kind, registration.original, registration.cleanup
        timer: TimerHandle | None = None
        if deadline is not None:
            timer = self.scheduler.schedule_at(
                deadline,
                lambda: self._expire_wait(waiter, caller, original, wait_id, started_at),
            )
        observer = self.wait_observer
        if observer is not None:
            remaining = None if deadline is None else deadline - self.clock.monotonic()
            observer.wait_started(
                wait_info(wait_id, caller.crew_id, caller.agent_id, kind, original, started_at, remaining)
            )
        try:
            return self._block(waiter, kind, cancel)
        finally:
            if timer is not None:
                timer.cancel()
            cleanup()
            if observer is not None:
                observer.wait_ended(wait_id)

    def _expire_wait(
        self, waiter: Waiter[Message], caller: CallerContext, original: str, wait_id: str, started_at: object
    ) -> None:
        timed_out = Message.wait_timed_out(
            message_id=MessageId.new(),
            at=self.clock.now(),
            original_topic=original,
            wait_id=wait_id,
            started_at=started_at,  # type: ignore[arg-type]
            target_crew_id=None if caller.is_system else caller.crew_id,
        )
        if waiter.try_complete(timed_out) and self.on_wait_timed_out is not None:
            self.on_wait_timed_out(timed_out)

    def _block(self, waiter: Waiter[Message], kind: str, cancel: CancelToken | None) -> Message:
        """Block the calling thread on ``waiter``, honouring ``cancel`` and hub stop."""
        unregister: Callable[[], None] | None = None
        budget_timer: TimerHandle | None = None
        if cancel is not None:
            unregister = cancel.on_cancel(waiter.fail)
            if cancel.deadline is not None and not cancel.cancelled:
                budget_timer = self.scheduler.schedule_at(cancel.deadline, cancel.fire_deadline)
        self._active_waiters[waiter] = kind
        if self._stopped:
            waiter.try_fail(HubStoppedError("the runtime was stopped while waiting"))
        try:
            return waiter.wait()
        finally:
            del self._active_waiters[waiter]
            if unregister is not None:
                unregister()
            if budget_timer is not None:
                budget_timer.cancel()

    def get_last_value(
        self, caller: CallerContext, key: str, crew_scope: CrewId | None, cancel: CancelToken | None
    ) -> Message | None:
        if cancel is not None:
            cancel.raise_if_cancelled()
        return self._last_values.get((crew_scope, key))

    def is_active_correlation(self, correlation_id: CorrelationId) -> bool:
        return self._replies.is_active(correlation_id)

    def pending_waits(self) -> dict[str, int]:
        counts = dict.fromkeys(WAIT_KINDS, 0)
        for kind in list(self._active_waiters.values()):
            counts[kind] += 1
        return counts

    def mailbox_registered(self, address: MailboxAddress | str) -> bool:
        return MailboxAddress.parse(address) in self._mailboxes

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        error = HubStoppedError("the runtime was stopped while waiting")
        waiters = list(self._active_waiters)
        for waiter in waiters:
            waiter.try_fail(error)
        self._replies.fail_all(HubStoppedError("the runtime was stopped before the reply arrived"))
        for subscription in list(self._subscriptions):
            subscription.close()
        with self._mailboxes_lock:
            handles = list(self._mailboxes.values())
            self._mailboxes.clear()
        for handle in handles:
            handle.close()
