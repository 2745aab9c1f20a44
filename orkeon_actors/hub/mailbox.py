"""Addressed mailboxes: one pykka actor each while it has work (a caller-runs actor,
see :mod:`orkeon_actors.actors.caller_runs`: run by the thread that tells it).

A mailbox gets its actor only when it first has work: a message, or a reader taken on.
Until then (a crew just woken, a crew parked on its waits) the handle keeps the
waiters registered on it, in order, and hands them to the actor when it starts; a
mailbox that never receives anything never starts an actor (no actor start, no
registry entry, nothing to stop at close).

The actor owns the mailbox's FIFO queue, its one-shot waiters (``wait_for`` on the
mailbox) and at most one *held reader* (consume-and-hold): while a reader holds the
mailbox, every message goes straight into the reader's local buffer, so draining costs
no actor round trip per message. When the actor takes the reader on, it switches the
mailbox to *direct* mode, where ``post`` pushes into the reader's buffer from the
poster's own thread and skips the actor hop. Messages still in the actor's inbox at that
moment must not be overtaken, so posts made meanwhile are *staged* on the handle and
released behind the last of them (see :class:`MailboxHandle`). When the reader leaves,
what it did not consume goes back to the front of the queue, in order.

Guarantees:

* FIFO: messages are consumed in the order the actor received them, which for one
  poster is the order of its ``post`` calls (spec §10.4).
* No loss: a message offered to a waiter that already timed out or was cancelled stays
  queued for the next consumer; a post either raises ``MailboxNotFoundError`` or is
  accepted by the actor; closing the mailbox returns every message nobody consumed.
* No duplicate: each message is handed to exactly one consumer.

It sits at the project's 600-line mark because the handle's staging and the actor's
direct mode must be read together; the leases (:mod:`~orkeon_actors.hub.leases`) live
beside it.

In a :class:`~orkeon_actors.sim.Simulation` the mailbox actors are the same: only their
turns run on the simulation's seeded scheduler (:mod:`orkeon_actors.actors.executor`).
"""

from __future__ import annotations

import enum
import threading
from collections import deque

import attrs
import pykka

from orkeon_actors.actors.caller_runs import CallerRunsActor, deferred_turns, turns_deferred
from orkeon_actors.actors.executor import TurnExecutor, current_executor, executor_scope
from orkeon_actors.errors import MailboxNotFoundError
from orkeon_actors.hub.waiter import LocalBuffer, Waiter
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import MessageId
from orkeon_actors.model.message import Message

__all__ = ["LeaseWaiter", "MailboxActor", "MailboxHandle"]


class LeaseWaiter(Waiter[Message]):
    """The waiter of a lease (:meth:`MailboxHandle.add_lease`): the mailbox that
    completes it holds every later message back until the lease ends
    (:meth:`MailboxHandle.end_lease`). ``handle`` is the mailbox it waits on."""

    __slots__ = ("handle",)

    def __init__(self, handle: MailboxHandle) -> None:
        super().__init__()
        self.handle = handle


@attrs.frozen(eq=False)
class _AddWaiter:
    waiter: Waiter[Message]


@attrs.frozen(eq=False)
class _RemoveWaiter:
    waiter: Waiter[Message]


@attrs.frozen(eq=False)
class _Attach:
    buffer: LocalBuffer[Message]


@attrs.frozen(eq=False)
class _Detach:
    buffer: LocalBuffer[Message]
    leftovers: list[Message]  # what the reader did not consume: goes first
    staged: list[Message]  # posts staged on the handle: go last


@attrs.frozen(eq=False)
class _Close:
    staged: list[Message]


@attrs.frozen
class _Depth:
    pass


@attrs.frozen(eq=False)
class _AddLease:
    waiter: LeaseWaiter


@attrs.frozen(eq=False)
class _RemoveLease:
    waiter: LeaseWaiter


@attrs.frozen(eq=False)
class _EndLease:
    waiter: LeaseWaiter
    given_back: Message | None  # None: confirmed


class _LeaseHold(LocalBuffer[Message]):
    """Stands in the actor's reader slot while a lease holds the mailbox: every message
    that arrives meanwhile is kept here, in order, so that no reader overtakes the
    leased one. Its length counts the leased message (it is not consumed yet), and
    closing it with the mailbox returns the leased message first."""

    __slots__ = ("message", "waiter")

    def __init__(self, waiter: LeaseWaiter, message: Message) -> None:
        super().__init__()
        self.waiter = waiter
        self.message = message

    def release(self) -> list[Message]:
        """End the hold: what arrived meanwhile, in order."""
        return super().close()

    def close(self) -> list[Message]:
        return [self.message, *super().close()]

    def __len__(self) -> int:
        return super().__len__() + 1


class _LeaseEntry:
    """A lease's waiter as the actor queues it among the others: completing it
    installs the hold in the same turn (a timeout or a cancellation settles the
    waiter itself, never through this entry, so it holds nothing)."""

    __slots__ = ("actor", "waiter")

    def __init__(self, actor: MailboxActor, waiter: LeaseWaiter) -> None:
        self.actor = actor
        self.waiter = waiter

    @property
    def settled(self) -> bool:
        return self.waiter.settled

    def try_complete(self, message: Message) -> bool:
        if not self.waiter.try_complete(message):
            return False
        self.actor.hold(self.waiter, message)
        return True

    def try_fail(self, error: BaseException) -> bool:
        return self.waiter.try_fail(error)


class MailboxActor(CallerRunsActor):
    """The state of one mailbox. Never blocks; every message is handled in O(1)
    amortised. A caller-runs actor: the thread that tells it an idle mailbox runs the
    turn (no thread hand-off per post, wait or close); :class:`MailboxHandle` tells it
    inside :func:`deferred_turns`, so a turn never runs under the handle's lock."""

    def __init__(
        self, address: MailboxAddress, handle: MailboxHandle, waiters: list[Waiter[Message]] | None = None
    ) -> None:
        super().__init__()
        self.address = address
        self._handle = handle
        self._queue: deque[Message] = deque()
        self._waiters: deque[Waiter[Message] | _LeaseEntry] = deque(waiters or ())
        self._reader: LocalBuffer[Message] | None = None
        self._readers_after_lease: list[LocalBuffer[Message]] = []

    def on_receive(self, message: object) -> object:
        kind = type(message)
        if kind is Message:
            self._deliver(message)  # type: ignore[arg-type]
            self._message_processed()
        elif kind is _AddWaiter:
            self._add_waiter(message.waiter)  # type: ignore[attr-defined]
        elif kind is _RemoveWaiter:
            waiter = message.waiter  # type: ignore[attr-defined]
            if waiter in self._waiters:  # else it was already served
                self._waiters.remove(waiter)
        elif kind is _Attach:
            self._attach(message.buffer)  # type: ignore[attr-defined]
        elif kind is _Detach:
            self._detach(message.buffer, message.leftovers, message.staged)  # type: ignore[attr-defined]
        elif kind is _Close:
            return self._close(message.staged)  # type: ignore[attr-defined]
        elif kind is _Depth:
            return len(self._queue) + (len(self._reader) if self._reader is not None else 0)
        else:
            self._on_lease(message)
        return None

    def _deliver(self, message: Message) -> None:
        reader = self._reader
        if reader is not None:
            if not reader.push(message):
                # The reader is leaving: keep the message in order until _Detach puts
                # the reader's leftovers in front of it.
                self._queue.append(message)
            return
        waiters = self._waiters
        while waiters:
            if waiters.popleft().try_complete(message):
                return
        self._queue.append(message)

    def _message_processed(self) -> None:
        handle = self._handle
        with handle.lock:
            handle.in_flight -= 1
            if handle.in_flight == 0 and handle.mode is _Mode.STAGING:
                self._go_direct()

    def _go_direct(self) -> None:
        """Under the handle's lock, once no told message is left in the inbox: release the
        staged posts into the reader, behind everything it already has, and let later
        posts push straight into it."""
        handle = self._handle
        reader = self._reader
        staged = handle.staged
        if reader is None or reader.closed or handle.closed:
            return
        if staged and not reader.push_many(list(staged)):
            return
        handle.staged = None
        handle.direct_reader = reader
        handle.mode = _Mode.DIRECT

    def _add_waiter(self, waiter: Waiter[Message] | _LeaseEntry) -> None:
        queue = self._queue
        if queue:
            message = queue.popleft()  # first: a lease's hold takes the rest of the queue
            if not waiter.try_complete(message):
                queue.appendleft(message)  # the waiter gave up before we got to it; keep the message
        elif not waiter.settled:
            self._waiters.append(waiter)

    # -- leases (off the hot path: only their own messages reach this code) ------------

    def _on_lease(self, message: object) -> None:
        kind = type(message)
        if kind is _AddLease:
            entry = _LeaseEntry(self, message.waiter)  # type: ignore[attr-defined]
            if self._reader is None:
                self._add_waiter(entry)
            elif not entry.settled:  # a reader or another lease holds the mailbox: wait for it to leave
                self._waiters.append(entry)
        elif kind is _RemoveLease:
            waiter = message.waiter  # type: ignore[attr-defined]
            for queued in self._waiters:
                if isinstance(queued, _LeaseEntry) and queued.waiter is waiter:
                    self._waiters.remove(queued)
                    break
        elif kind is _EndLease:
            self._end_lease(message.waiter, message.given_back)  # type: ignore[attr-defined]

    def hold(self, waiter: LeaseWaiter, message: Message) -> None:
        """In this actor's turn, ``message`` was just handed to the lease ``waiter``:
        hold the mailbox (the queue moves into the hold, later messages go there too)."""
        hold = _LeaseHold(waiter, message)
        queue = self._queue
        if queue:
            hold.push_many(list(queue))
            queue.clear()
        self._reader = hold

    def _end_lease(self, waiter: LeaseWaiter, given_back: Message | None) -> None:
        hold = self._reader
        if not isinstance(hold, _LeaseHold) or hold.waiter is not waiter:
            return  # not this lease's hold (the handle refuses a closed mailbox first)
        self._reader = None
        queue = self._queue
        queue.extend(hold.release())
        if given_back is not None:
            queue.appendleft(given_back)
        while queue and self._waiters and self._reader is None:
            self._add_waiter(self._waiters.popleft())
        while self._readers_after_lease and self._reader is None:
            self._attach(self._readers_after_lease.pop(0))

    def _attach(self, buffer: LocalBuffer[Message]) -> None:
        if isinstance(self._reader, _LeaseHold):
            self._readers_after_lease.append(buffer)  # attached when the lease ends
            return
        if self._reader is not None and not self._reader.closed:
            buffer.close()
            return
        self._reader = buffer
        if self._queue and buffer.push_many(list(self._queue)):
            self._queue.clear()
        handle = self._handle
        with handle.lock:
            if handle.closed or buffer.closed:
                return
            if handle.in_flight == 0:
                self._go_direct()
            else:
                handle.mode = _Mode.STAGING

    def _detach(self, buffer: LocalBuffer[Message], leftovers: list[Message], staged: list[Message]) -> None:
        if buffer in self._readers_after_lease:  # left before the lease ended: it was never attached
            self._readers_after_lease.remove(buffer)
        if self._reader is buffer:
            self._reader = None
        # Order: what the reader held, then what reached this actor after it closed
        # (already in the queue), then what was staged on the handle.
        self._queue.extendleft(reversed(leftovers))
        self._queue.extend(staged)
        while self._queue and self._waiters:
            self._add_waiter(self._waiters.popleft())

    def _close(self, staged: list[Message]) -> list[Message]:
        leftovers: list[Message] = []
        if self._reader is not None:
            leftovers.extend(self._reader.close())
            self._reader = None
        leftovers.extend(self._queue)
        self._queue.clear()
        leftovers.extend(staged)
        for waiting in self._readers_after_lease:
            waiting.close()
        self._readers_after_lease.clear()
        error = MailboxNotFoundError(self.address)
        while self._waiters:
            self._waiters.popleft().try_fail(error)
        self.stop()
        return leftovers


class _Mode(enum.Enum):
    TELL = "tell"  # posts are told to the actor
    STAGING = "staging"  # a reader was taken on; posts wait on the handle until the inbox drains
    DIRECT = "direct"  # posts are pushed straight into the held reader


class MailboxHandle:
    """The hub's reference to one mailbox: the actor, a closed flag, and the delivery mode.

    Every method runs under ``lock``; ``close`` flips ``closed`` under it before stopping
    the actor, so a post either raises ``MailboxNotFoundError`` or is accepted (and then
    consumed, or handed back by ``close``).

    The actor starts with the first message or reader (:meth:`_actor`); before that,
    ``waiting`` holds the waiters added (the queue is empty by construction, so a
    waiter can only wait), and ``close`` fails them itself.

    Delivery modes: ``TELL`` (the actor receives each post), ``STAGING`` (a reader was
    taken on while ``in_flight`` posts were still in the actor's inbox: new posts are kept
    in ``staged`` until the actor has pushed the last in-flight one, then released in
    order) and ``DIRECT`` (posts go straight into the reader's buffer).
    """

    __slots__ = (
        "address",
        "closed",
        "direct_reader",
        "executor",
        "held",
        "in_flight",
        "lock",
        "mode",
        "owner",
        "parked",
        "ref",
        "reloaded",
        "staged",
        "waiting",
    )

    def __init__(self, address: MailboxAddress, owner: object) -> None:
        self.address = address
        self.lock = threading.Lock()
        self.closed = False
        self.owner = owner
        self.mode = _Mode.TELL
        self.in_flight = 0  # posts told to the actor and not yet processed by it
        self.staged: list[Message] | None = None  # a list once a post is staged: only appended, then taken whole
        self.direct_reader: LocalBuffer[Message] | None = None
        self.held: list[Message] | None = None  # see hold()
        self.parked = False  # closed by a durable hub's park_mailbox: its posts are kept
        self.reloaded: set[MessageId] | None = None  # see release()
        self.ref: pykka.ActorRef[MailboxActor] | None = None  # started by _actor()
        # The executor the actor binds to, whichever thread starts it: the scope's at
        # registration (a simulation's), else the actor class's pool.
        self.executor: TurnExecutor = current_executor() or MailboxActor.pool
        self.waiting: list[Waiter[Message]] = []  # waiters added before the actor started

    @property
    def actor_started(self) -> bool:
        """Whether the mailbox has an actor (it had a message or a reader)."""
        return self.ref is not None

    def _actor(self) -> pykka.ActorRef[MailboxActor]:
        """Under the lock, inside ``deferred_turns``: the actor, started now if it was
        not, with the waiters added so far (in order, those already settled left out)."""
        ref = self.ref
        if ref is None:
            waiting = [w for w in self.waiting if not w.settled]
            self.waiting = []
            with executor_scope(self.executor):
                ref = self.ref = MailboxActor.start(self.address, self, waiting)
        return ref

    def deliver(self, message: Message) -> None:
        if self.mode is _Mode.DIRECT:
            # The hot path of a held reader: push into its buffer, under the lock, with no
            # deferred_turns block (three Python calls a message, issue 31). Nothing here
            # can run an actor's turn: nobody parks a waiter on a held reader's buffer
            # (its reader only takes), so the push settles nothing and runs no callback.
            with self.lock:
                reader = self.direct_reader
                if (
                    self.mode is _Mode.DIRECT
                    and reader is not None
                    and reader.parked is None
                    and self.held is None
                    and self.reloaded is None
                    and not self.closed
                    and reader.push(message)
                ):
                    return
            # Anything else (closing, holding, a reader that left): the general path below.
        with deferred_turns(), self.lock:
            if self.closed:
                raise MailboxNotFoundError(self.address)
            if self.held is not None:
                self.held.append(message)
                return
            reloaded = self.reloaded
            if reloaded is not None and message.id in reloaded:
                reloaded.discard(message.id)  # handed over by its poster after the reload: once
                if not reloaded:
                    self.reloaded = None
                return
            self._deliver_now(message)

    def hold(self) -> None:
        """Hold every delivery on the handle until :meth:`release` (a durable hub
        reloading what was kept for the mailbox while posts may already arrive live)."""
        with self.lock:
            self.held = []

    def release(self, first: list[Message]) -> None:
        """Deliver ``first`` (in order), then the deliveries held since :meth:`hold`
        that are not among them, and stop holding. A message both reloaded and
        delivered live counts once, also when its poster hands it over after this
        (``first``'s ids are remembered until then). Closed meanwhile: ``close``
        returned the held ones."""
        with deferred_turns(), self.lock:
            held, self.held = self.held, None
            if self.closed:
                return
            ids = {m.id for m in first}
            self.reloaded = set(ids) if ids else None
            for message in first:
                self._deliver_now(message)
            for message in held or ():
                if message.id in ids:
                    self.reloaded.discard(message.id)  # type: ignore[union-attr]
                else:
                    self._deliver_now(message)
            if not self.reloaded:
                self.reloaded = None

    def _deliver_now(self, message: Message) -> None:
        """Under the lock, open: hand ``message`` over by the current mode."""
        mode = self.mode
        if mode is _Mode.DIRECT:
            reader = self.direct_reader
            if reader is not None and reader.push(message):
                return
        elif mode is _Mode.STAGING:
            if self.staged is None:
                self.staged = [message]
            else:
                self.staged.append(message)
            return
        self.in_flight += 1
        self._actor().tell(message)

    def add_waiter(self, waiter: Waiter[Message]) -> None:
        with deferred_turns(), self.lock:
            if self.closed:
                raise MailboxNotFoundError(self.address)
            ref = self.ref
            if ref is not None:
                ref.tell(_AddWaiter(waiter))
                return
            # No actor: nothing was ever delivered, so nothing is queued; the waiter waits.
            waiting = self.waiting
            if len(waiting) >= 8:
                waiting[:] = [w for w in waiting if not w.settled]
            if not waiter.settled:
                waiting.append(waiter)

    def remove_waiter(self, waiter: Waiter[Message]) -> None:
        with deferred_turns(), self.lock:
            if self.closed:
                return
            ref = self.ref
            if ref is not None:
                ref.tell(_RemoveWaiter(waiter))
            elif waiter in self.waiting:
                self.waiting.remove(waiter)

    def add_lease(self, waiter: LeaseWaiter) -> None:
        """Queue a lease's ``waiter`` among the mailbox's waiters (see
        :class:`LeaseWaiter`). Raises ``MailboxNotFoundError`` once closed."""
        with deferred_turns(), self.lock:
            if self.closed:
                raise MailboxNotFoundError(self.address)
            self._actor().tell(_AddLease(waiter))

    def remove_lease(self, waiter: LeaseWaiter) -> None:
        """Withdraw a lease's ``waiter`` that is still waiting (a no-op once served)."""
        with deferred_turns(), self.lock:
            if not self.closed:
                self._actor().tell(_RemoveLease(waiter))

    def end_lease(self, waiter: LeaseWaiter, given_back: Message | None) -> None:
        """End the hold of the lease ``waiter`` took: confirmed (``given_back`` None)
        or with ``given_back`` put back at the front. Raises ``MailboxNotFoundError``
        if the mailbox was closed meanwhile (its ``close`` returned the leased message)."""
        with deferred_turns(), self.lock:
            if self.closed:
                raise MailboxNotFoundError(self.address)
            self._actor().tell(_EndLease(waiter, given_back))

    def attach(self, buffer: LocalBuffer[Message]) -> None:
        with deferred_turns(), self.lock:
            if self.closed:
                raise MailboxNotFoundError(self.address)
            self._actor().tell(_Attach(buffer))

    def detach(self, buffer: LocalBuffer[Message]) -> None:
        with deferred_turns(), self.lock:
            leftovers = buffer.close()
            if self.direct_reader is buffer or self.mode is _Mode.STAGING:
                self.direct_reader = None
                self.mode = _Mode.TELL
            staged = self.staged or []
            self.staged = None
            if not self.closed:
                self._actor().tell(_Detach(buffer, leftovers, staged))

    def depth(self) -> int:
        self._refuse_to_wait_for_a_deferred_turn("depth")
        with deferred_turns(), self.lock:
            if self.closed:
                return 0
            staged = len(self.staged or ())
            if self.ref is None:
                return staged
            future = self.ref.ask(_Depth(), block=False)
        return int(future.get()) + staged

    def close(self) -> list[Message]:
        self._refuse_to_wait_for_a_deferred_turn("close")
        with deferred_turns(), self.lock:
            if self.closed:
                return []
            self.closed = True
            self.direct_reader = None
            self.mode = _Mode.TELL
            staged = self.staged or []
            self.staged = None
            if self.held is not None:
                staged.extend(self.held)
                self.held = None
            if self.ref is None:
                waiting, self.waiting = self.waiting, []
                future = None
            else:
                future = self.ref.ask(_Close(staged), block=False)
        if future is None:
            # No actor ever started: nothing was queued; fail the waiters, off the lock.
            error = MailboxNotFoundError(self.address)
            for waiter in waiting:
                waiter.try_fail(error)
            return staged
        leftovers: list[Message] = future.get()
        return leftovers

    def _refuse_to_wait_for_a_deferred_turn(self, what: str) -> None:
        """``depth`` and ``close`` wait for the mailbox actor's answer; inside an open
        :func:`deferred_turns` block (a callback run under another mailbox's lock) the
        turn that answers would only run once the block exits, after the wait: fail
        at once instead of waiting forever."""
        if turns_deferred():
            raise RuntimeError(
                f"MailboxHandle.{what}() on {self.address} inside a deferred_turns() block (under a mailbox's "
                "lock) would wait forever for its own deferred turn: call it after the block exits"
            )
