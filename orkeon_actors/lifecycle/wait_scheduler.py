"""``DurableWaitScheduler``: the durable timers of sleeping crews' finite waits (spec
§3.3 ``WaitScheduler``, §7.3, §9.2).

The timers *are* the ``pending_waits`` rows (``expires_at``, written with each snapshot):
nothing is lost across a crash, and nothing holds every wait in memory. The scheduler
keeps a **window** in memory: the nearest expiries, at most ``window_size`` rows and at
most ``window`` seconds ahead, read in ``(expires_at, wait_id)`` order from the covering
index ``idx_pending_waits_expiry_order`` (schema version 3: a range scan, never a sort,
whatever the number of sleeping crews). One timer on the runtime's scheduler fires at
the earliest of them; when the window is used up (or its time span passed), the next
window is read, starting after the last row read.

An expiry written after the window was read but falling inside it must be
:meth:`schedule`\\ d (the supervisor does it for every wait it puts to sleep); one
beyond the window's end needs nothing, the next read finds it. ``FOREVER`` waits have
no ``expires_at`` and never enter it.

Not thread-safe: every method runs on its owner's thread (the supervisor actor). The
timer only calls ``on_timer`` (from the scheduler's thread), which must hand the tick to
that thread (the supervisor tells itself) and then call :meth:`due` there.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.scheduler import Scheduler, TimerHandle
from orkeon_actors.lifecycle.ports import ExpiryIndex
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import CrewId

__all__ = ["DurableWaitScheduler"]

_END: Final = "\uffff"


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class DurableWaitScheduler:
    """The :class:`~orkeon_actors.lifecycle.ports.WaitScheduler` over the
    ``pending_waits`` index (see the module docstring).

    ``window`` (seconds, positive) and ``window_size`` (rows, positive) bound what is
    held in memory; ``InvalidArgumentError`` otherwise."""

    def __init__(
        self,
        index: ExpiryIndex,
        clock: Clock,
        scheduler: Scheduler,
        on_timer: Callable[[], None],
        *,
        window: float = 60.0,
        window_size: int = 10_000,
        batch: int = 64,
    ) -> None:
        if not window > 0:
            raise InvalidArgumentError(f"window must be a positive number of seconds, got {window!r}")
        if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
            raise InvalidArgumentError(f"window_size must be a positive int, got {window_size!r}")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InvalidArgumentError(f"batch must be a positive int, got {batch!r}")
        self._index = index
        self._clock = clock
        self._scheduler = scheduler
        self._on_timer = on_timer
        self.window = window
        self.window_size = window_size
        self.batch = batch
        self._heap: list[tuple[str, str, str]] = []  # (expires_at text, wait_id, crew_id)
        self._cancelled: set[str] = set()
        self._horizon: tuple[str, str] = ("", "")  # the last (expires_at, wait_id) read
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None
        self._stopped = False

    def sizes(self) -> dict[str, int]:
        """The expiries it holds (at most ``window_size`` read, plus those scheduled
        since) and the cancelled wait ids not reached yet."""
        return {"expiries_held": len(self._heap), "expiries_cancelled": len(self._cancelled)}

    # -- the WaitScheduler port ----------------------------------------------------------

    def start(self) -> None:
        """Read the first window (an expiry already past is due at once) and arm."""
        self._refill()

    def schedule(self, crew_id: CrewId, wait_id: str, expires_at: datetime) -> None:
        """A wait just written to the index: hold it if it falls inside the window read."""
        key = (self._index.time_key(expires_at), wait_id)
        self._cancelled.discard(wait_id)
        if key <= self._horizon:
            heapq.heappush(self._heap, (key[0], wait_id, str(crew_id)))
            self._arm()

    def cancel(self, wait_id: str) -> None:
        """Forget a held expiry (its wait was satisfied). Optional: :meth:`due` also
        drops expiries whose wait is no longer in the index."""
        if any(entry[1] == wait_id for entry in self._heap):
            self._cancelled.add(wait_id)

    def due(self, limit: int | None = None) -> dict[CrewId, list[str]]:
        """The timer fired (or the owner asks again): pop the held expiries that are
        due, for at most ``limit`` crews (default and cap: ``batch``; below 1: none),
        keep those whose wait is still in the index (a crew may have woken and slept
        again meanwhile: one query for the whole batch), read the next window if needed
        and re-arm (at once if more are due: a burst of expiries is handed over a batch
        of crews per tick, so the owner handles other messages in between). Returns
        ``{crew: [wait_id, ...]}``."""
        if self._timer is not None:
            self._timer.cancel()  # called before its timer fired: one timer armed at a time
        self._timer = None
        self._timer_at = None
        if self._stopped:
            return {}
        crews = self.batch if limit is None else min(limit, self.batch)
        now_text = self._index.time_key(self._clock.now())
        popped: dict[CrewId, list[str]] = {}
        while self._heap and self._heap[0][0] <= now_text:
            if len(popped) >= crews and CrewId(self._heap[0][2]) not in popped:
                break
            _, wait_id, crew = heapq.heappop(self._heap)
            if wait_id in self._cancelled:
                self._cancelled.discard(wait_id)
                continue
            popped.setdefault(CrewId(crew), []).append(wait_id)
        due: dict[CrewId, list[str]] = {}
        if popped:
            held = self._still_indexed([w for wait_ids in popped.values() for w in wait_ids])
            for crew_id, wait_ids in popped.items():
                if any(w in held for w in wait_ids):
                    due[crew_id] = wait_ids
        if not self._heap or (self._horizon[0] <= now_text and self._heap[0][0] > now_text):
            self._refill()
        else:
            self._arm()
        return due

    def _still_indexed(self, wait_ids: list[str]) -> set[str]:
        """Which of ``wait_ids`` still have their ``pending_waits`` row (primary-key
        lookups, one query per ``_IDS_PER_QUERY`` ids)."""
        return self._index.still_indexed(wait_ids)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @property
    def held(self) -> int:
        """How many expiries are held in memory (at most ``window_size`` plus those
        scheduled since the last read)."""
        return len(self._heap)

    # -- the window -----------------------------------------------------------------------

    def _refill(self) -> None:
        limit_text = self._index.time_key(self._clock.now() + timedelta(seconds=self.window))
        rows = self._index.window(self._horizon, limit_text, self.window_size)
        for row in rows:
            heapq.heappush(self._heap, row)
        if len(rows) >= self.window_size:
            last = rows[-1]
            self._horizon = (last[0], last[1])
        else:
            self._horizon = (limit_text, _END)
        self._arm()

    def _arm(self) -> None:
        if self._stopped:
            return
        clock = self._clock
        now = clock.now()
        next_text = self._heap[0][0] if self._heap else self._horizon[0]
        delay = 0.0 if next_text <= self._index.time_key(now) else max(0.0, (_parse(next_text) - now).total_seconds())
        at = clock.monotonic() + delay
        if self._timer is not None and self._timer_at is not None and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._scheduler.schedule_at(at, self._on_timer)
