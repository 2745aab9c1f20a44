"""Non-blocking waits and push subscriptions for the in-memory hub.

``wait_for`` blocks its caller's thread; an actor must never do that (ARCHITECTURE §3).
:func:`wait_async` registers the *same* wait (the same router entry / mailbox waiter /
reply listener, the same scheduler timer producing the same ``WaitTimedOutMessage``,
the same ``pending_waits()`` counting, the same receive stages) and returns at once; the
outcome is handed to ``on_done`` exactly once:

* the matching message (after the receive stages; a message a stage drops as a
  duplicate re-arms the wait, as ``wait_for`` loops);
* the hub's ``WaitTimedOutMessage`` when a finite timeout expires (``message.is_timeout``);
* the cancel token's error (``CancelledError``, ``BudgetExhaustedError``; a token with a
  ``deadline``, such as a budget's wall-time limit, fires at that deadline), or
  ``HubStoppedError`` / ``MailboxNotFoundError`` if the runtime stops or the mailbox closes;
* nothing at all after :meth:`AsyncWait.cancel` returned ``True``.

``on_done`` runs on whichever thread settled the wait (a mailbox actor, a publisher, the
scheduler, a canceller): it must be short and must not block. Telling an actor is the
intended use.

:func:`push_subscription` is the lossless counterpart of a long-lived subscription for
actors: every matching message is handed to a callback on the publisher's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

import pykka

from orkeon_actors.errors import HubStoppedError, MailboxNotFoundError
from orkeon_actors.hub.boundary import check_mailbox_reader
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.hub.memory import HubCore, MemorySubscription, WaitRegistration
from orkeon_actors.hub.observe import WaitObserver, wait_info
from orkeon_actors.hub.port import CallerContext, EventHub, Subscription
from orkeon_actors.hub.scheduler import TimerHandle
from orkeon_actors.hub.waiter import BufferClosed, Waiter
from orkeon_actors.hub.waits import admit_wait
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.ids import CorrelationId, CrewId, new_ulid_str
from orkeon_actors.model.message import FrozenMap, Message
from orkeon_actors.model.options import (
    ForeverWaitTimeout,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
)

__all__ = [
    "AsyncWait",
    "receive_async",
    "PushSubscription",
    "WaitOutcome",
    "deliver_to_mailbox",
    "flush_mailboxes",
    "forget_request",
    "push_subscription",
    "wait_async",
]

WaitOutcome = Message | BaseException
"""What ``on_done`` receives: a message (possibly the timeout message) or an error."""


def _memory_hub(hub: EventHub) -> HubCore:
    if not isinstance(hub, HubCore):
        raise TypeError(f"non-blocking waits need a hub built on the hub core, got {type(hub).__name__}")
    return hub


class AsyncWait(Waiter[Message]):
    """A wait registered by :func:`wait_async`. ``wait_id`` is the id the hub puts in the
    ``original_wait_id`` of its timeout message; ``deadline`` is monotonic seconds on the
    hub's clock (``None`` for ``FOREVER``).

    The wait is its own :class:`Waiter` (one test-and-set lock, no blocking side): it is
    what the mailbox, the router or the pending request holds. A parked crew holds one
    per wait and one per watched mailbox, so each costs what its round needs and no
    more: no timer list without a deadline, no registration object on a mailbox."""

    __slots__ = (
        "_claimed",
        "_cleanup",
        "_early",
        "_finished",
        "_hub",
        "_lock",
        "_mailbox",
        "_observed",
        "_on_done",
        "_registering",
        "_source",
        "_timers",
        "_unregister",
        "_wait_id",
        "caller",
        "deadline",
        "descriptor",
        "kind",
        "started_at",
    )

    def __init__(
        self,
        hub: HubCore,
        caller: CallerContext,
        descriptor: WaitDescriptor,
        deadline: float | None,
        on_done: Callable[[WaitOutcome], None],
        source: MemorySubscription | None = None,
    ) -> None:
        # Waiter's fields, without its blocking side (never waited on); the claim is a
        # flag flipped under a lock shared with other waits (a lock each is 2 x 88 bytes).
        self._lock = _STRIPES[hash(self) % len(_STRIPES)]
        self._claimed = False
        self._value: Message | None = None
        self._error: BaseException | None = None
        self.on_settled = None
        self._hub = hub
        self._source = source
        self.caller = caller
        self.descriptor = descriptor
        self.deadline = deadline
        self._wait_id: str | None = None
        self.started_at: datetime = hub.clock.now()
        self.kind = (
            "on_topic"
            if isinstance(descriptor, WaitOnTopic)
            else "on_mailbox"
            if isinstance(descriptor, WaitOnMailbox)
            else "on_reply"
        )
        self._on_done = on_done
        self._finished = False
        self._registering = False
        self._early = False
        self._cleanup: Callable[[], None] | None = None
        self._mailbox: MailboxHandle | None = None
        self._timers: list[TimerHandle] | None = None
        self._unregister: Callable[[], None] | None = None
        self._observed: WaitObserver | None = None

    # -- the Waiter side (what the mailbox, the router or the request settles) ----------

    def _claim_round(self) -> bool:
        """Test-and-set: whether this call took the current round."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    @property
    def settled(self) -> bool:
        return self._claimed

    def try_complete(self, value: Message) -> bool:
        # The claim and the registering check under one hold of the lock (the outcome is
        # noted before it is released: _arm may handle it as soon as it is).
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            self._value = value
            if self._registering:
                self._early = True  # handled by _arm once the registration is known
                return True
        self._on_settled()
        return True

    def try_fail(self, error: BaseException) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            self._error = error
            if self._registering:
                self._early = True
                return True
        self._on_settled()
        return True

    def wait(self) -> Message:
        raise TypeError("an AsyncWait never blocks: its outcome goes to on_done")

    def peek(self) -> tuple[bool, Message | None, BaseException | None]:
        return self._claimed, self._value, self._error

    @property
    def wait_id(self) -> str:
        """The wait's id, minted when first asked for (a mailbox watch never times out
        and is seldom observed: most never need one)."""
        wait_id = self._wait_id
        if wait_id is None:
            with self._lock:
                wait_id = self._wait_id
                if wait_id is None:
                    wait_id = self._wait_id = new_ulid_str()
        return wait_id

    @property
    def finished(self) -> bool:
        """True once the outcome was handed to ``on_done`` or the wait was cancelled
        (``settled``, the waiter's flag, is true from the moment a round was taken)."""
        return self._finished

    def cancel(self) -> bool:
        """Withdraw the wait. Returns ``True`` if it was still pending (``on_done`` will
        never be called), ``False`` if it had already settled (``on_done`` was or is
        being called with its outcome)."""
        return self.try_fail(_Withdrawn())

    # -- internals ---------------------------------------------------------------------

    def _arm(self, again: bool = False) -> None:
        """Register one round of the wait (``again``: a new round of a settled one, its
        settle hook already holding back, see :meth:`_on_settled`).

        Registering may settle it at once, on this thread (a message already queued in
        a mailbox whose turn runs here) or on another (a mailbox actor): the settle hook
        then only notes it, and the outcome is handled here once the registration is
        known, so its cleanup runs and no timer is left behind."""
        hub = self._hub
        descriptor = self.descriptor
        self._cleanup = None
        self._mailbox = None
        if not again:
            with self._lock:
                self._registering = True
                self._early = False
        hub.track_waiter(self, self.kind)
        registration: WaitRegistration | None = None
        try:
            if self._source is not None:
                registration = _subscription_registration(self._source, self)
            elif type(descriptor) is WaitOnMailbox:
                # The common parked case, without a registration object: the handle
                # itself is what the cleanup needs.
                handle = hub.live_mailbox(descriptor.address)
                if handle is None:
                    raise MailboxNotFoundError(descriptor.address)
                handle.add_waiter(self)
                self._mailbox = handle
            else:
                registration = hub.register_wait(self.caller, descriptor, self)
        except BaseException:
            hub.untrack_waiter(self)
            raise
        if registration is not None:
            self._cleanup = registration.cleanup
        with self._lock:
            self._registering = False
            early = self._early
        if early:
            self._on_settled()
            return
        if self.deadline is not None:
            caller, wait_id, started_at, original = self.caller, self.wait_id, self.started_at, self._original()
            self._timers = [
                hub.scheduler.schedule_at(
                    self.deadline, lambda: hub.expire_wait(self, caller, original, wait_id, started_at)
                )
            ]
        observer = hub.wait_observer
        if observer is not None:
            remaining = None if self.deadline is None else self.deadline - hub.clock.monotonic()
            who = self.caller
            info = wait_info(
                self.wait_id, who.crew_id, who.agent_id, self.kind, self._original(), self.started_at, remaining
            )
            observer.wait_started(info)
            self._observed = observer
        if registration is not None:
            registration.listen()  # after the hooks: an already-answered request settles at once
        if hub.stopped:
            self.try_fail(HubStoppedError("the runtime was stopped while waiting"))

    def _original(self) -> str:
        """What the wait is on, as its timeout message's ``original_topic`` names it."""
        descriptor = self.descriptor
        if isinstance(descriptor, WaitOnTopic):
            return descriptor.topic
        if isinstance(descriptor, WaitOnMailbox):
            return str(descriptor.address)
        return str(descriptor.correlation)

    def start(self, cancel: CancelToken | None) -> None:
        """Register the first round, then settle the wait with ``cancel``'s error when
        it fires (its deadline included)."""
        self._arm()
        if cancel is None:
            return
        self._unregister = cancel.on_cancel(self._fire)
        if cancel.deadline is not None and not cancel.cancelled:
            timer = self._hub.scheduler.schedule_at(cancel.deadline, cancel.fire_deadline)
            if self._timers is None:
                self._timers = [timer]
            else:
                self._timers.append(timer)
        if self._finished:  # settled while we registered: undo what _finish could not see
            self._unregister()
            for timer in self._timers or ():
                timer.cancel()

    def _fire(self, error: BaseException) -> None:
        """The cancel token fired: settle the current round with its error."""
        self.try_fail(error)

    def _on_settled(self) -> None:
        hub = self._hub
        hub.untrack_waiter(self)
        observed, self._observed = self._observed, None
        if observed is not None:
            observed.wait_ended(self.wait_id)
        timers, self._timers = self._timers, None
        for timer in timers or ():
            timer.cancel()
        value, error = self._value, self._error
        mailbox, self._mailbox = self._mailbox, None
        cleanup, self._cleanup = self._cleanup, None  # it refers back to this wait: no cycle left
        if not hub.stopped:  # a stopped hub drops its router and mailboxes whole, not wait by wait
            if mailbox is not None and (value is None or value.is_timeout):
                mailbox.remove_waiter(self)  # a delivered message was taken off its waiters already
            if cleanup is not None:
                cleanup()
        if isinstance(error, _Withdrawn):
            self._finish(None)
            return
        if error is not None:
            if isinstance(error, BufferClosed) and self._source is not None:
                error = self._source.closed_error()  # the subscription closed while we waited
            self._finish(error)
            return
        assert value is not None
        if value.is_timeout or isinstance(self.descriptor, WaitOnReply):
            self._finish(value)
            return
        receive = hub.receive_subscription if self._source is not None else hub.receive_wait
        consumed = hub.consume(receive, value)
        if consumed is not None:
            self._finish(consumed)
            return
        # A receive stage dropped a duplicate: wait again, as wait_for does (a new round:
        # the claim is released once nothing of the old round can reach it).
        self._value = None
        with self._lock:
            self._registering = True  # a cancel from now on is noted, then handled by _arm
            self._early = False
            self._claimed = False
        try:
            self._arm(again=True)
        except Exception as exc:  # the mailbox closed meanwhile: that is the outcome
            if self._claim_round():
                self._finish(exc)

    def _finish(self, outcome: WaitOutcome | None) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
        if self._unregister is not None:
            self._unregister()
        if outcome is not None:
            self._on_done(outcome)

    def __repr__(self) -> str:
        return f"AsyncWait({self.kind}, wait_id={self.wait_id}, finished={self._finished})"


def _subscription_registration(subscription: MemorySubscription, waiter: Waiter[Message]) -> WaitRegistration:
    """Park ``waiter`` on ``subscription``'s buffer when listening: the oldest buffered
    message settles it at once, else the next one routed to the subscription does."""
    buffer = subscription.buffer

    def listen() -> None:
        try:
            item = buffer.take_or_park(waiter)
        except BufferClosed:
            waiter.try_fail(subscription.closed_error())
            return
        if item is not None and not waiter.try_complete(item):
            buffer.requeue_front(item)  # it timed out or was cancelled meanwhile: keep the item

    return WaitRegistration("on_topic", subscription.pattern, lambda: buffer.unpark(waiter), listen)


_STRIPES: tuple[threading.Lock, ...] = tuple(threading.Lock() for _ in range(64))
"""The locks :class:`AsyncWait` flags are flipped under (a wait picks one by its hash):
each critical section is a few attribute reads and writes (and minting a wait id),
never a call that takes a lock or settles anything."""


class _Withdrawn(Exception):
    """Internal: the waiter was failed by :meth:`AsyncWait.cancel`."""


def wait_async(
    hub: EventHub,
    caller: CallerContext,
    descriptor: WaitDescriptor,
    timeout: WaitTimeout,
    cancel: CancelToken | None,
    on_done: Callable[[WaitOutcome], None],
) -> AsyncWait:
    """Register ``descriptor`` as a wait and return at once (see the module docstring).

    Raises at once, like ``wait_for``: ``HubStoppedError`` on a stopped hub, the token's
    error if ``cancel`` already fired, ``MailboxNotFoundError`` for an unregistered
    mailbox, ``UnknownCorrelationError`` for a correlation no request holds,
    ``EventAclError`` for a mailbox ``caller``'s crew does not own (as ``wait_for``).
    """
    memory = _memory_hub(hub)
    if isinstance(descriptor, WaitOnMailbox):
        check_mailbox_reader(caller, descriptor.address, memory.client_mailbox_owner(descriptor.address))
    deadline = admit_wait(memory, descriptor, timeout, cancel)
    wait = AsyncWait(memory, caller, descriptor, deadline, on_done)
    wait.start(cancel)
    return wait


def receive_async(
    hub: EventHub,
    subscription: Subscription,
    timeout: WaitTimeout,
    cancel: CancelToken | None,
    on_done: Callable[[WaitOutcome], None],
) -> AsyncWait:
    """The non-blocking :meth:`Subscription.receive`: register a wait for the next
    message of ``subscription`` and return at once; ``on_done`` gets, exactly once, the
    oldest buffered message (at once if one is buffered) or the next one routed to it
    (after the subscription's receive stages), the hub's ``WaitTimedOutMessage`` (its
    ``original_topic`` is the pattern; the subscription stays open, nothing is lost),
    the token's error, ``HubStoppedError``, or ``InvalidArgumentError`` if the
    subscription is closed. As for :func:`wait_async`, nothing after a successful
    ``cancel()``: a message the withdrawn wait did not take stays buffered.

    Raises at once ``HubStoppedError`` on a stopped hub and the token's error if
    ``cancel`` already fired."""
    memory = _memory_hub(hub)
    if not isinstance(subscription, MemorySubscription) or subscription.hub is not memory:
        raise TypeError("receive_async needs a subscription of this in-memory hub")
    if memory.stopped:
        raise HubStoppedError("the runtime was stopped; start a new Runtime")
    if cancel is not None:
        cancel.raise_if_cancelled()
    deadline = None if isinstance(timeout, ForeverWaitTimeout) else memory.clock.monotonic() + timeout.seconds
    descriptor = WaitOnTopic(subscription.pattern, subscription.metadata_match)
    wait = AsyncWait(memory, CallerContext(subscription.crew_id), descriptor, deadline, on_done, subscription)
    wait.start(cancel)
    return wait


class PushSubscription:
    """A router entry that hands every matching message to ``on_message`` on the
    publisher's thread (no buffer, no thread). Scope (§10.1) and ``metadata_match`` are
    applied by the router as for any subscription; receive stages are *not* run here:
    the consumer runs them where it handles the message (see :func:`consume`)."""

    __slots__ = ("_hub", "_on_message", "closed", "crew_id", "metadata_match", "pattern")

    def __init__(
        self,
        hub: HubCore,
        pattern: str,
        crew_id: CrewId,
        metadata_match: FrozenMap | None,
        on_message: Callable[[Message], None],
    ) -> None:
        self._hub = hub
        self.pattern = pattern
        self.crew_id = crew_id
        self.metadata_match = metadata_match
        self._on_message = on_message
        self.closed = False

    def offer(self, message: Message) -> None:
        if not self.closed:
            self._on_message(message)

    def consume(self, message: Message) -> Message | None:
        """Run the hub's subscription receive stages; ``None`` if a stage dropped it."""
        return self._hub.consume(self._hub.receive_subscription, message)

    def close(self) -> None:
        """Stop receiving; idempotent."""
        self.closed = True
        self._hub.router.remove(self)


def push_subscription(
    hub: EventHub,
    caller: CallerContext,
    pattern: str,
    on_message: Callable[[Message], None],
    *,
    metadata_match: FrozenMap | None = None,
) -> PushSubscription:
    """Subscribe ``on_message`` to ``pattern`` (validated like ``subscribe``).

    Every message published after this returns and matching the pattern, the caller's
    scope and ``metadata_match`` is handed to ``on_message`` once, in publish order per
    publisher. Raises ``HubStoppedError`` on a stopped hub."""
    from orkeon_actors.model.address import validate_topic_pattern

    memory = _memory_hub(hub)
    if memory.stopped:
        raise HubStoppedError("the runtime was stopped; start a new Runtime")
    validate_topic_pattern(pattern)
    entry = PushSubscription(memory, pattern, caller.crew_id, metadata_match, on_message)
    memory.router.add(entry)
    return entry


def deliver_to_mailbox(hub: EventHub, message: Message, address: MailboxAddress) -> Message:
    """Hand an already-accepted ``message`` to another mailbox of the same crew, envelope
    unchanged except ``target_mailbox`` (a crew routing what reached ``crew://`` to one of
    its agents: the source and the correlation id survive, so the agent can reply).

    No publish stage runs again: the message passed them on its way to the crew. Raises
    ``MailboxNotFoundError`` if ``address`` is not registered."""
    import attrs

    memory = _memory_hub(hub)
    handle = memory.live_mailbox(address)
    if handle is None:
        raise MailboxNotFoundError(address)
    forwarded = attrs.evolve(message, target_mailbox=address)
    handle.deliver(forwarded)
    return forwarded


def flush_mailboxes(hub: EventHub) -> None:
    """Wait until every mailbox actor processed what it was told so far (one round trip
    each). Used by the simulation's quiescence check."""
    memory = _memory_hub(hub)
    for handle in memory.live_mailboxes():
        try:
            handle.depth()
        except pykka.ActorDeadError:
            continue  # closed meanwhile: nothing left to process


def forget_request(hub: EventHub, correlation_id: str) -> None:
    """Withdraw the pending request ``correlation_id`` (its requester stopped waiting,
    as a cancelled blocking ``send`` does): a later reply is refused with
    ``UnknownCorrelationError``. Idempotent; unknown ids are ignored."""
    _memory_hub(hub).forget_request(CorrelationId(correlation_id))
