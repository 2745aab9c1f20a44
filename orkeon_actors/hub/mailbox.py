"""Addressed mailboxes: one pykka actor each.

The actor owns the mailbox's FIFO queue, its one-shot waiters (``wait_for`` on the
mailbox) and at most one *held reader* (consume-and-hold): while a reader holds the
mailbox, the actor pushes every message straight into the reader's local buffer, so
draining costs no actor round trip per message. When the reader leaves, what it did not
consume goes back to the front of the queue, in order.

Guarantees:

* FIFO: messages are consumed in the order the actor received them, which for one
  poster is the order of its ``post`` calls (spec §10.4).
* No loss: a message offered to a waiter that already timed out or was cancelled stays
  queued for the next consumer; a post either raises ``MailboxNotFoundError`` or is
  accepted by the actor; closing the mailbox returns every message nobody consumed.
* No duplicate: each message is handed to exactly one consumer.
"""

from __future__ import annotations

import threading
from collections import deque

import attrs
import pykka

from orkeon_actors.errors import MailboxNotFoundError
from orkeon_actors.hub.waiter import LocalBuffer, Waiter
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.message import Message

__all__ = ["MailboxActor", "MailboxHandle"]


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
    leftovers: list[Message]


@attrs.frozen
class _Close:
    pass


@attrs.frozen
class _Depth:
    pass


class MailboxActor(pykka.ThreadingActor):
    """The state of one mailbox. Never blocks; every message is handled in O(1)
    amortised."""

    def __init__(self, address: MailboxAddress) -> None:
        super().__init__()
        self.address = address
        self._queue: deque[Message] = deque()
        self._waiters: deque[Waiter[Message]] = deque()
        self._reader: LocalBuffer[Message] | None = None

    def on_receive(self, message: object) -> object:
        kind = type(message)
        if kind is Message:
            self._deliver(message)  # type: ignore[arg-type]
        elif kind is _AddWaiter:
            self._add_waiter(message.waiter)  # type: ignore[attr-defined]
        elif kind is _RemoveWaiter:
            waiter = message.waiter  # type: ignore[attr-defined]
            if waiter in self._waiters:  # else it was already served
                self._waiters.remove(waiter)
        elif kind is _Attach:
            self._attach(message.buffer)  # type: ignore[attr-defined]
        elif kind is _Detach:
            self._detach(message.buffer, message.leftovers)  # type: ignore[attr-defined]
        elif kind is _Close:
            return self._close()
        elif kind is _Depth:
            return len(self._queue) + (len(self._reader) if self._reader is not None else 0)
        return None

    def _deliver(self, message: Message) -> None:
        if self._reader is not None and self._reader.push(message):
            return
        waiters = self._waiters
        while waiters:
            if waiters.popleft().try_complete(message):
                return
        self._queue.append(message)

    def _add_waiter(self, waiter: Waiter[Message]) -> None:
        queue = self._queue
        if queue:
            if not waiter.try_complete(queue[0]):
                return  # the waiter gave up before we got to it; keep the message
            queue.popleft()
        elif not waiter.settled:
            self._waiters.append(waiter)

    def _attach(self, buffer: LocalBuffer[Message]) -> None:
        if self._reader is not None and not self._reader.closed:
            buffer.close()
            return
        self._reader = buffer
        if self._queue and buffer.push_many(list(self._queue)):
            self._queue.clear()

    def _detach(self, buffer: LocalBuffer[Message], leftovers: list[Message]) -> None:
        if self._reader is buffer:
            self._reader = None
        # Everything in `leftovers` was pushed before anything still in the queue.
        self._queue.extendleft(reversed(leftovers))
        while self._queue and self._waiters:
            self._add_waiter(self._waiters.popleft())

    def _close(self) -> list[Message]:
        leftovers: list[Message] = []
        if self._reader is not None:
            leftovers.extend(self._reader.close())
            self._reader = None
        leftovers.extend(self._queue)
        self._queue.clear()
        error = MailboxNotFoundError(self.address)
        while self._waiters:
            self._waiters.popleft().try_fail(error)
        self.stop()
        return leftovers


class MailboxHandle:
    """The hub's reference to one mailbox: the actor plus a closed flag.

    ``post`` tells the actor while holding ``lock``; ``close`` flips ``closed`` under the
    same lock before stopping the actor, so a post either raises
    ``MailboxNotFoundError`` or lands in the actor before the close does.
    """

    __slots__ = ("address", "closed", "lock", "owner", "ref")

    def __init__(self, address: MailboxAddress, owner: object) -> None:
        self.address = address
        self.ref: pykka.ActorRef[MailboxActor] = MailboxActor.start(address)
        self.lock = threading.Lock()
        self.closed = False
        self.owner = owner

    def deliver(self, message: Message) -> None:
        with self.lock:
            if self.closed:
                raise MailboxNotFoundError(self.address)
            self.ref.tell(message)

    def add_waiter(self, waiter: Waiter[Message]) -> None:
        with self.lock:
            if self.closed:
                raise MailboxNotFoundError(self.address)
            self.ref.tell(_AddWaiter(waiter))

    def remove_waiter(self, waiter: Waiter[Message]) -> None:
        with self.lock:
            if not self.closed:
                self.ref.tell(_RemoveWaiter(waiter))

    def attach(self, buffer: LocalBuffer[Message]) -> None:
        with self.lock:
            if self.closed:
                raise MailboxNotFoundError(self.address)
            self.ref.tell(_Attach(buffer))

    def detach(self, buffer: LocalBuffer[Message]) -> None:
        with self.lock:
            leftovers = buffer.close()
            if not self.closed:
                self.ref.tell(_Detach(buffer, leftovers))

    def depth(self) -> int:
        with self.lock:
            if self.closed:
                return 0
            future = self.ref.ask(_Depth(), block=False)
        return int(future.get())

    def close(self) -> list[Message]:
        with self.lock:
            if self.closed:
                return []
            self.closed = True
            future = self.ref.ask(_Close(), block=False)
        leftovers: list[Message] = future.get()
        return leftovers
