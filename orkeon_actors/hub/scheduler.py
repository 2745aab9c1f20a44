"""The timer service: a pykka actor owning a heap of deadlines on the runtime's Clock.

pykka has no timers, so this is ours. Scheduling never waits for the actor; a due
timer's callback runs on the scheduler actor's thread and must be short and
non-blocking (settling a :class:`~orkeon_actors.hub.waiter.Waiter` is the typical one).

Cancellation is lazy: ``TimerHandle.cancel()`` flips a flag and the entry is skipped when
it comes due (or swept when cancelled entries outnumber live ones), which keeps the
send/reply hot path free of a second actor message.

Time source:

* with a :class:`~orkeon_actors.model.clock.SystemClock`, a small waker thread sleeps
  until the earliest deadline and then tells the actor to fire;
* with a :class:`~orkeon_actors.model.clock.VirtualClock`, ``clock.advance()`` asks the
  actor to fire whatever became due and returns only after those callbacks ran;
* with a :class:`~orkeon_actors.model.clock.VirtualClock` and an actor executor scope
  active where the scheduler is made (:func:`~orkeon_actors.actors.executor.executor_scope`,
  what a deterministic simulation does), there is no actor and no thread: each due
  timer's callback is submitted to that executor as a task of its own, so that timers
  run on the same deterministic schedule as the actors' turns.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable

import attrs
import pykka
from loguru import logger

from orkeon_actors.actors.executor import TurnExecutor, current_executor
from orkeon_actors.model.clock import Clock

__all__ = ["Scheduler", "TimerHandle"]


class TimerHandle:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@attrs.frozen
class _Fire:
    pass


class _TimerHeap:
    """The deadlines, shared between schedulers (any thread) and the actor (firing)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[float, int, TimerHandle]] = []
        self.seq = itertools.count()
        self.sweep_at = 4096

    def push(self, handle: TimerHandle) -> bool:
        """Add ``handle``; True when it became the earliest deadline."""
        with self.lock:
            entries = self.entries
            heapq.heappush(entries, (handle.deadline, next(self.seq), handle))
            if len(entries) >= self.sweep_at:
                self.entries = entries = [e for e in entries if not e[2].cancelled]
                heapq.heapify(entries)
                self.sweep_at = max(4096, 2 * len(entries))
            return entries[0][2] is handle

    def pop_due(self, now: float) -> list[TimerHandle]:
        due = []
        with self.lock:
            entries = self.entries
            while entries and entries[0][0] <= now:
                handle = heapq.heappop(entries)[2]
                if not handle.cancelled:
                    handle.cancelled = True
                    due.append(handle)
        return due

    def next_deadline(self) -> float | None:
        with self.lock:
            entries = self.entries
            while entries and entries[0][2].cancelled:
                heapq.heappop(entries)
            return entries[0][0] if entries else None

    def live_count(self) -> int:
        with self.lock:
            return sum(1 for e in self.entries if not e[2].cancelled)


class _SchedulerActor(pykka.ThreadingActor):
    """Fires due timers, in deadline order, on its own thread."""

    def __init__(self, clock: Clock, heap: _TimerHeap, waker: _Waker | None) -> None:
        super().__init__()
        self._clock = clock
        self._heap = heap
        self._waker = waker

    def on_receive(self, message: object) -> object:
        if type(message) is _Fire:
            for handle in self._heap.pop_due(self._clock.monotonic()):
                try:
                    handle.callback()
                except Exception:  # one broken callback must not stop every other timer
                    logger.opt(exception=True).error("timer callback failed")
            if self._waker is not None:
                self._waker.set_deadline(self._heap.next_deadline())
        return None


class _Waker(threading.Thread):
    """Sleeps until the earliest deadline, then tells the actor to fire."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(name="orkeon-scheduler-waker", daemon=True)
        self._clock = clock
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._stopped = False
        self.actor_ref: pykka.ActorRef[_SchedulerActor] | None = None

    def set_deadline(self, deadline: float | None) -> None:
        with self._cond:
            if deadline != self._deadline:
                self._deadline = deadline
                self._cond.notify()

    def earlier(self, deadline: float) -> None:
        with self._cond:
            if self._deadline is None or deadline < self._deadline:
                self._deadline = deadline
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def run(self) -> None:
        with self._cond:
            while not self._stopped:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                delay = self._deadline - self._clock.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                self._deadline = None
                ref = self.actor_ref
                if ref is not None:
                    try:
                        ref.tell(_Fire())
                    except pykka.ActorDeadError:
                        return


class Scheduler:
    """The timer service of one runtime. Thread-safe.

    ``schedule_at`` pushes onto a lock-protected heap from the caller's thread (no actor
    message, no thread wake-up unless the new deadline is the earliest); the scheduler
    actor fires due timers on its own thread, woken by a small waker thread (system
    clock) or by ``VirtualClock.advance`` (which returns after they fired).
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap = _TimerHeap()
        self._executor: TurnExecutor | None = current_executor() if clock.is_virtual else None
        if self._executor is not None:
            self._waker = None
            self._ref: pykka.ActorRef[_SchedulerActor] | None = None
            clock.add_listener(self.fire_due)
            return
        self._waker = None if clock.is_virtual else _Waker(clock)
        self._ref = _SchedulerActor.start(clock, self._heap, self._waker)
        if self._waker is not None:
            self._waker.actor_ref = self._ref
            self._waker.start()
        else:
            clock.add_listener(self.fire_due)

    def schedule_at(self, deadline: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` on the scheduler thread once ``clock.monotonic() >= deadline``.

        The callback must be short and must not block. Cancel with ``handle.cancel()``.
        """
        handle = TimerHandle(deadline, callback)
        earliest = self._heap.push(handle)
        if self._waker is not None:
            if earliest:
                self._waker.earlier(deadline)
        elif deadline <= self.clock.monotonic():
            self.fire_due()
        return handle

    def schedule_in(self, seconds: float, callback: Callable[[], None]) -> TimerHandle:
        return self.schedule_at(self.clock.monotonic() + seconds, callback)

    def fire_due(self) -> None:
        """Fire every due timer now and return after their callbacks ran (on an
        executor: submit each due callback to it, in deadline order)."""
        executor = self._executor
        if executor is not None:
            for handle in self._heap.pop_due(self.clock.monotonic()):
                executor.submit(_guarded(handle.callback))
            return
        assert self._ref is not None
        try:
            self._ref.ask(_Fire())
        except pykka.ActorDeadError:
            return

    def next_deadline(self) -> float | None:
        """The earliest live timer's deadline (monotonic seconds), or ``None``: what a
        simulation advances a virtual clock to."""
        return self._heap.next_deadline()

    def pending_count(self) -> int:
        """Live (not cancelled, not fired) timers; for tests and gauges."""
        return self._heap.live_count()

    def stop(self) -> None:
        if self._waker is not None:
            self._waker.stop()
            self._waker.join()
        else:
            self.clock.remove_listener(self.fire_due)
        if self._ref is not None:
            self._ref.stop()


def _guarded(callback: Callable[[], None]) -> Callable[[], None]:
    """``callback`` as an executor task: an exception is logged (one broken callback
    must not stop every other timer), as the scheduler actor does."""

    def fire() -> None:
        try:
            callback()
        except Exception:
            logger.opt(exception=True).error("timer callback failed")

    fire.__qualname__ = "timer"
    return fire
