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
from time import monotonic
from typing import Generic, TypeVar

from orkeon_actors.errors import EventHubError

__all__ = ["Waiter", "LocalBuffer"]

T = TypeVar("T")

_LONGEST_WAIT = min(threading.TIMEOUT_MAX, 86_400.0)
"""The longest single timed lock wait :meth:`Waiter.wait_until` makes (a later
deadline is reached in several)."""


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
        if self.on_settled is not None:  # a call less on the hot path (a reply, a delivery)
            self._after_settle()
        return True

    def try_fail(self, error: BaseException) -> bool:
        if not self._claim.acquire(False):
            return False
        self._error = error
        self._done.release()
        if self.on_settled is not None:
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

    def wait_until(self, deadline: float, on_deadline: Callable[[], BaseException]) -> T:
        """:meth:`wait`, timed by this thread: once ``deadline`` (on ``time.monotonic``,
        the system clock's) passes unsettled, ``on_deadline()`` runs and this waiter
        fails with the error it returns, unless something settled it first (the
        outcome that won is returned or raised, as by :meth:`wait`)."""
        done = self._done
        while True:
            remaining = deadline - monotonic()
            if remaining <= 0:
                self.try_fail(on_deadline())
                done.acquire()
                break
            if done.acquire(True, remaining if remaining < _LONGEST_WAIT else _LONGEST_WAIT):
                break
        done.release()
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

    Every delivery and every receive goes through here, so it is built on a plain lock
    rather than ``threading.Condition`` (whose enter, exit, wait and notify are Python
    calls, a dozen per message handed from a pusher to a blocked taker): a blocked
    ``take`` sleeps on a lock of its own, held until a push, a close or an interrupt
    releases it (issue 31: the hub's hot path).
    """

    __slots__ = ("_closed", "_interrupt", "_items", "_lock", "_maxlen", "_sleepers", "_spare", "dropped", "parked")

    def __init__(self, maxlen: int | None = None) -> None:
        if maxlen is not None and maxlen < 1:
            raise ValueError(f"maxlen must be a positive number of items or None, got {maxlen!r}")
        self._items: deque[T] = deque()
        self._lock = threading.Lock()
        self._closed = False
        self._interrupt: BaseException | None = None
        self._maxlen = maxlen
        self._sleepers: list[threading.Lock] = []  # one held lock per taker blocked in take()
        self._spare: threading.Lock | None = None  # a held sleeper lock a woken taker left for the next wait
        self.parked: Waiter[T] | None = None
        """The waiter :meth:`take_or_park` parked, if any (read it, never set it)."""
        self.dropped = 0

    def _wake_all(self) -> None:
        """Under the lock: wake every blocked taker (a close or an interrupt)."""
        for sleeper in self._sleepers:
            sleeper.release()
        self._sleepers.clear()

    def _handed_to_parked(self, item: T) -> bool:
        """Under the lock: give ``item`` to the parked waiter, if one still wants it."""
        parked = self.parked
        if parked is None:
            return False
        self.parked = None
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
        with self._lock:
            if self._closed:
                return False
            parked = self.parked
            if parked is None:
                if self._maxlen is None:
                    self._items.append(item)
                else:
                    self._append(item)
                if self._sleepers:
                    self._sleepers.pop(0).release()
                return True
            self.parked = None
        # Hand the item to the parked waiter outside the lock: settling it runs its
        # callbacks (a non-blocking wait's cleanup, receive stages, a re-park), which may
        # use this buffer again.
        if parked.try_complete(item):
            return True
        with self._lock:  # it had settled (timed out, cancelled): queue the item as usual
            if self._closed:
                return False
            self._append(item)
            if self._sleepers:
                self._sleepers.pop(0).release()
            return True

    def requeue_front(self, item: T) -> None:
        """Put back ``item``, taken but not handed out, as the oldest one (a waiter
        that settled otherwise in the meantime refused it); dropped if closed, like
        everything buffered at close."""
        with self._lock:
            if not self._closed:
                self._items.appendleft(item)
                if self._sleepers:
                    self._sleepers.pop(0).release()

    def peek_all(self) -> list[T]:
        """The buffered items, oldest first, without taking them."""
        with self._lock:
            return list(self._items)

    def push_many(self, items: list[T]) -> bool:
        with self._lock:
            if self._closed:
                return False
            rest = items[1:] if items and self._handed_to_parked(items[0]) else items
            for item in rest:
                self._append(item)
            if rest and self._sleepers:
                self._sleepers.pop(0).release()
            return True

    def take_or_park(self, waiter: Waiter[T]) -> T | None:
        """The oldest item if there is one; otherwise park ``waiter`` (the next push
        completes it) and return ``None``. Raises ``BufferClosed`` once closed and empty.
        Call :meth:`unpark` when done waiting, however the wait ended."""
        with self._lock:
            if self._items:
                return self._items.popleft()
            if self._closed:
                raise BufferClosed("buffer closed")
            self.parked = waiter
            return None

    def unpark(self, waiter: Waiter[T]) -> None:
        """Forget ``waiter`` if it is still parked (idempotent)."""
        with self._lock:
            if self.parked is waiter:
                self.parked = None

    def take(self) -> T:
        """Block for the next item. Raises the interrupt error if one was set, or
        ``BufferClosed`` once closed and empty."""
        lock = self._lock
        while True:
            with lock:
                if self._interrupt is not None:
                    raise self._interrupt
                if self._items:
                    return self._items.popleft()
                if self._closed:
                    raise BufferClosed("buffer closed")
                sleeper = self._spare
                if sleeper is None:
                    sleeper = threading.Lock()
                    sleeper.acquire()
                else:
                    self._spare = None
                self._sleepers.append(sleeper)
            try:
                sleeper.acquire()  # released (and taken off the list) by a push, close or interrupt
            except BaseException:  # interrupted while asleep (KeyboardInterrupt): leave no sleeper behind
                with lock:
                    if sleeper in self._sleepers:
                        self._sleepers.remove(sleeper)
                raise
            self._spare = sleeper  # off the list and held again: the next wait reuses it

    def take_nowait(self) -> T | None:
        with self._lock:
            if self._items:
                return self._items.popleft()
            return None

    def interrupt(self, error: BaseException) -> None:
        """Make the blocked (or next) ``take`` raise ``error``; items stay buffered."""
        with self._lock:
            if self._interrupt is None:
                self._interrupt = error
            self._wake_all()

    def clear_interrupt(self) -> None:
        with self._lock:
            self._interrupt = None

    def close(self) -> list[T]:
        """Close; return the items nobody took (in order). Idempotent."""
        with self._lock:
            self._closed = True
            leftovers = list(self._items)
            self._items.clear()
            parked, self.parked = self.parked, None
            self._wake_all()
        if parked is not None:
            parked.try_fail(BufferClosed("buffer closed"))
        return leftovers

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._items)
