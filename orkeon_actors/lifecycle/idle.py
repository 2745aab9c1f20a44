"""``CrewIdleDetector``: when has a live crew been idle long enough to sleep (spec §3.3
``IdleDetector``, §7.1)?

* :meth:`touch` (any thread, lock-free: one dict store) records activity: the
  supervisor touches a crew on every message it handles and every orchestration
  transition (the crew's activity hook), and when it starts or resumes;
* :meth:`watch` gives a crew its ``idle_timeout`` (``None``: never idle) and arms one
  timer on the runtime's scheduler at ``last touch + timeout``;
* when the timer fires, the detector's owner is told (``on_timer(crew_id)``, from the
  scheduler's thread) and calls :meth:`check` on its own thread: a crew touched since
  is re-armed from its last touch; otherwise the ``on_idle`` callback runs with the
  crew id. The callback decides (the supervisor sleeps the crew only if it is waiting
  for a message); if it does not put the crew to sleep it calls :meth:`restart`, which
  counts the idle time again from now.
* :meth:`least_recently_touched` orders crews for the ``max_active`` cap (least
  recently used first).

Times are the runtime clock's ``monotonic()`` (a ``VirtualClock`` makes it
deterministic). Everything but :meth:`touch` and :meth:`last_touched` runs on the
owner's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.scheduler import Scheduler, TimerHandle
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import CrewId

__all__ = ["CrewIdleDetector"]


class CrewIdleDetector:
    """The :class:`~orkeon_actors.lifecycle.ports.IdleDetector` of the supervisor (see
    the module docstring)."""

    def __init__(self, clock: Clock, scheduler: Scheduler, on_timer: Callable[[CrewId], None]) -> None:
        self._clock = clock
        self._scheduler = scheduler
        self._on_timer = on_timer
        self._touched: dict[CrewId, float] = {}
        self._timeouts: dict[CrewId, float] = {}
        self._timers: dict[CrewId, TimerHandle] = {}
        self._callback: Callable[[CrewId], None] | None = None

    # -- the IdleDetector port --------------------------------------------------------------

    def touch(self, crew_id: CrewId) -> None:
        """Record activity of ``crew_id`` now (any thread)."""
        self._touched[crew_id] = self._clock.monotonic()

    def sizes(self) -> dict[str, int]:
        """How many crews its maps hold (touched, timeouts, armed timers): the crews it
        watches, each forgotten when it sleeps or finishes."""
        return {
            "idle_touched": len(self._touched),
            "idle_timeouts": len(self._timeouts),
            "idle_timers": len(self._timers),
        }

    def on_idle(self, callback: Callable[[CrewId], None]) -> None:
        """Run ``callback(crew_id)`` (on the owner's thread) when a watched crew stayed
        untouched for its timeout."""
        self._callback = callback

    # -- owner's thread ---------------------------------------------------------------------

    def watch(self, crew_id: CrewId, timeout: float | None) -> None:
        """Start (or restart) watching ``crew_id``: touched now, idle after ``timeout``
        seconds without activity; ``None`` watches nothing but the touches (for the
        cap). ``InvalidArgumentError`` for a timeout that is not a positive number."""
        if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
            raise InvalidArgumentError(f"idle_timeout must be a positive number of seconds or None, got {timeout!r}")
        self.touch(crew_id)
        if timeout is None:
            self._timeouts.pop(crew_id, None)
            self._cancel(crew_id)
            return
        self._timeouts[crew_id] = timeout
        self._arm(crew_id)

    def restart(self, crew_id: CrewId) -> None:
        """Count the idle time of a watched crew again from now (it was idle but could
        not sleep: busy, or its sleep failed)."""
        if crew_id in self._timeouts or crew_id in self._touched:
            self.touch(crew_id)
            self._arm(crew_id)

    def forget(self, crew_id: CrewId) -> None:
        """Stop watching ``crew_id`` (it sleeps, or finished)."""
        self._cancel(crew_id)
        self._timeouts.pop(crew_id, None)
        self._touched.pop(crew_id, None)

    def pause(self, crew_id: CrewId) -> None:
        """Disarm the timer of ``crew_id`` but keep its timeout and last touch (it is
        snapshotting: :meth:`restart` re-arms it if the sleep does not happen)."""
        self._cancel(crew_id)

    def check(self, crew_id: CrewId) -> None:
        """The timer of ``crew_id`` fired: re-arm if it was touched since, else call
        ``on_idle``."""
        self._timers.pop(crew_id, None)
        timeout = self._timeouts.get(crew_id)
        if timeout is None:
            return
        if self._clock.monotonic() < self.last_touched(crew_id) + timeout:
            self._arm(crew_id)
            return
        if self._callback is not None:
            self._callback(crew_id)

    def last_touched(self, crew_id: CrewId) -> float:
        """The last activity of ``crew_id`` (``monotonic()``; now if never touched)."""
        return self._touched.get(crew_id, self._clock.monotonic())

    def least_recently_touched(self, crews: Iterable[CrewId], count: int) -> list[CrewId]:
        """The ``count`` crews of ``crews`` touched longest ago, oldest first."""
        if count <= 0:
            return []
        return [crew for _, crew in sorted((self._touched.get(c, 0.0), c) for c in crews)[:count]]

    def stop(self) -> None:
        for crew_id in list(self._timers):
            self._cancel(crew_id)

    def _arm(self, crew_id: CrewId) -> None:
        timeout = self._timeouts.get(crew_id)
        if timeout is None:
            return
        self._cancel(crew_id)
        notify = self._on_timer
        self._timers[crew_id] = self._scheduler.schedule_at(
            self.last_touched(crew_id) + timeout, lambda: notify(crew_id)
        )

    def _cancel(self, crew_id: CrewId) -> None:
        timer = self._timers.pop(crew_id, None)
        if timer is not None:
            timer.cancel()
