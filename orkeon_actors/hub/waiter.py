"""The two thread-safe primitives every blocking hub call is built on.

* :class:`Waiter`: a one-shot slot completed by whoever gets there first (a matching
  message, the scheduler's timeout, a cancellation). Completion is a test-and-set, so
  a message offered to a waiter that already timed out is *refused* and stays where it
  was: it is never swallowed.
* :class:`LocalBuffer`: the reader-side FIFO a mailbox actor or the topic router pushes
  into (consume-and-hold). Closing it hands back what was not consumed.

Only the caller's own thread ever blocks, and only on these; actor threads never do.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from orkeon_actors.errors import EventHubError

__all__ = ["Waiter", "LocalBuffer"]

T = TypeVar("T")


class Waiter(Generic[T]):
    """A one-shot result: ``try_complete`` / ``try_fail`` return ``False`` if it was
    already settled. ``wait()`` blocks the calling thread until it is settled."""

    __slots__ = ("_claim", "_done", "_error", "_value", "on_settled")

    def __init__(self) -> None:
        self._claim = threading.Lock()
        self._done = threading.Lock()
        self._done.acquire()
        self._value: T | None = None
        self._error: BaseException | None = None
        self.on_settled: Callable[[], None] | None = None

    @property
    def settled(self) -> bool:
        return self._claim.locked()

    def try_complete(self, value: T) -> bool:
        if not self._claim.acquire(False):
            return False
        self._value = value
        self._done.release()
        self._after_settle()
        return True

    def try_fail(self, error: BaseException) -> bool:
        if not self._claim.acquire(False):
            return False
        self._error = error
        self._done.release()
        self._after_settle()
        return True

    def fail(self, error: BaseException) -> None:
        """``try_fail`` for callbacks that must return ``None`` (cancel tokens)."""
        self.try_fail(error)

    def _after_settle(self) -> None:
        # Settled once and for all: drop the hook, which usually refers back to this
        # waiter's owner (a cycle that only a full collection would free otherwise).
        callback, self.on_settled = self.on_settled, None
        if callback is not None:
            callback()

    def wait(self) -> T:
        """Block until settled; return the value or raise the error."""
        self._done.acquire()
        self._done.release()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def peek(self) -> tuple[bool, T | None, BaseException | None]:
        """(settled, value, error) without blocking."""
        if not self._done.locked():
            return True, self._value, self._error
        return False, None, None


class BufferClosed(EventHubError):
    """Internal: the buffer was closed while a reader waited."""


class LocalBuffer(Generic[T]):
    """A FIFO with one reader and any number of pushers.

    ``push`` returns ``False`` once the buffer is closed, so the pusher keeps the item.
    ``take`` blocks until an item, a close, or an ``interrupt`` (a cancellation).

    A reader that must not block indefinitely *parks* a :class:`Waiter` instead
    (:meth:`take_or_park`): the next pushed item completes that waiter rather than being
    queued, and an item refused by a waiter that already settled (timed out, cancelled)
    is queued as usual, so nothing is lost or handed out twice.

    ``maxlen`` bounds the queue: when it is full, a push drops the *oldest* item and
    counts it in :attr:`dropped`. ``None`` (the default) means unbounded.
    """

    __slots__ = ("_closed", "_cond", "_interrupt", "_items", "_maxlen", "_parked", "_takers", "dropped", "filter")

    def __init__(self, maxlen: int | None = None) -> None:
        if maxlen is not None and maxlen < 1:
            raise ValueError(f"maxlen must be a positive number of items or None, got {maxlen!r}")
        self._items: deque[T] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self._interrupt: BaseException | None = None
        self._maxlen = maxlen
        self._takers = 0  # threads blocked in take(): only then does a push need to notify
        self._parked: Waiter[T] | None = None
        self.dropped = 0

    def _handed_to_parked(self, item: T) -> bool:
        """Under the lock: give ``item`` to the parked waiter, if one still wants it."""
        parked = self._parked
        if parked is None:
            return False
        self._parked = None
        return parked.try_complete(item)

    def _append(self, item: T) -> None:
        """Under the lock: queue ``item``, dropping the oldest one when full."""
        if self._maxlen is not None and len(self._items) >= self._maxlen:
            self._items.popleft()
            self.dropped += 1
        self._items.append(item)

    def push(self, item: T) -> bool:
        # The hot path of every delivery: the common case (nobody parked, unbounded) is
        # inlined rather than going through _handed_to_parked / _append.
        with self._cond:
            if self._closed:
                return False
            parked = self._parked
            if parked is None:
                if self._maxlen is None:
                    self._items.append(item)
                else:
                    self._append(item)
                if self._takers:
                    self._cond.notify()
                return True
            self._parked = None
        # Hand the item to the parked waiter outside the lock: settling it runs its
        # callbacks (a non-blocking wait's cleanup, receive stages, a re-park), which may
        # use this buffer again.
        if parked.try_complete(item):
            return True
        with self._cond:  # it had settled (timed out, cancelled): queue the item as usual
            if self._closed:
                return False
            self._append(item)
            if self._takers:
                self._cond.notify()
            return True

    def requeue_front(self, item: T) -> None:
        """Put back ``item``, taken but not handed out, as the oldest one (a waiter
        that settled otherwise in the meantime refused it); dropped if closed, like
        everything buffered at close."""
        with self._cond:
            if not self._closed:
                self._items.appendleft(item)
                if self._takers:
                    self._cond.notify()

    def peek_all(self) -> list[T]:
        """The buffered items, oldest first, without taking them."""
        with self._cond:
            return list(self._items)

    def push_many(self, items: list[T]) -> bool:
        with self._cond:
            if self._closed:
                return False
            rest = items[1:] if items and self._handed_to_parked(items[0]) else items
            for item in rest:
                self._append(item)
            self._cond.notify()
            return True

    def take_or_park(self, waiter: Waiter[T]) -> T | None:
        """The oldest item if there is one; otherwise park ``waiter`` (the next push
        completes it) and return ``None``. Raises ``BufferClosed`` once closed and empty.
        Call :meth:`unpark` when done waiting, however the wait ended."""
        with self._cond:
            if self._items:
                return self._items.popleft()
            if self._closed:
                raise BufferClosed("buffer closed")
            self._parked = waiter
            return None

    def unpark(self, waiter: Waiter[T]) -> None:
        """Forget ``waiter`` if it is still parked (idempotent)."""
        with self._cond:
            if self._parked is waiter:
                self._parked = None

    def take(self) -> T:
        """Block for the next item. Raises the interrupt error if one was set, or
        ``BufferClosed`` once closed and empty."""
        with self._cond:
            while True:
                if self._interrupt is not None:
                    raise self._interrupt
                if self._items:
                    return self._items.popleft()
                if self._closed:
                    raise BufferClosed("buffer closed")
                self._takers += 1
                try:
                    self._cond.wait()
                finally:
                    self._takers -= 1

    def take_nowait(self) -> T | None:
        with self._cond:
            if self._items:
                return self._items.popleft()
            return None

    def interrupt(self, error: BaseException) -> None:
        """Make the blocked (or next) ``take`` raise ``error``; items stay buffered."""
        with self._cond:
            if self._interrupt is None:
                self._interrupt = error
            self._cond.notify_all()

    def clear_interrupt(self) -> None:
        with self._cond:
            self._interrupt = None

    def close(self) -> list[T]:
        """Close; return the items nobody took (in order). Idempotent."""
        with self._cond:
            self._closed = True
            leftovers = list(self._items)
            self._items.clear()
            parked, self._parked = self._parked, None
            self._cond.notify_all()
        if parked is not None:
            parked.try_fail(BufferClosed("buffer closed"))
        return leftovers

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._items)
