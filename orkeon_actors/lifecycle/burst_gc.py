"""CPython's full collections postponed while a burst of expiries runs (a bounded,
process-wide policy; see "Collections during a burst" in docs/lifecycle.md).

A burst of expiries (Orkeon EventHub & Crew Lifecycle specification, §9.2: thousands of
``WaitTimedOutMessage`` due at one instant) restores and finishes thousands of crews in
a few seconds. Each restored crew allocates thousands of container objects, most of
them alive long enough to be promoted to the oldest generation, so CPython's own
schedule runs a *full* collection every few hundred expiries, each walking the whole
heap: measured, about two thirds of what the collector costs a burst. While a burst
runs, the supervisor raises the oldest generation's threshold (``gc.set_threshold``;
the young generations keep collecting, so short-lived cycles still go at once) and
puts the thresholds it found back:

* once no batch of due crews has been woken for :data:`BURST_QUIET` seconds (checked
  by a timer on the supervisor's thread), or when the supervisor stops;
* after :data:`BURST_MAX_WAKES` crews woken in one burst: what a postponed full
  collection holds back is bounded by that many crews' garbage. A new burst then
  starts only after CPython ran a full collection of its own (the held-back garbage is
  gone), so a burst that never ends alternates postponed and normal collections.

Several supervisors in one process share the setting: the thresholds found by the
first burst to start are put back when the last one ends, unless something else
changed them meanwhile (then that setting is left alone).
"""

from __future__ import annotations

import gc
import threading

__all__ = ["BURST_GEN2_THRESHOLD", "BURST_MAX_WAKES", "BURST_QUIET", "BurstCollections"]

BURST_GEN2_THRESHOLD = 1_000
"""The oldest generation's threshold while a burst runs (CPython's default is 10:
collections of the middle generation between two full ones)."""

BURST_QUIET = 1.0
"""Seconds without a due batch woken after which a burst is over."""

BURST_MAX_WAKES = 10_000
"""Crews woken in one burst before the thresholds are put back."""

_lock = threading.Lock()
_holders = 0
_found: tuple[int, int, int] | None = None
_raised: tuple[int, int, int] | None = None


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def _hold() -> None:
    global _holders, _found, _raised
    with _lock:
        _holders += 1
        if _holders == 1:
            found = gc.get_threshold()
            _found = found
            _raised = (found[0], found[1], max(found[2], BURST_GEN2_THRESHOLD))
            gc.set_threshold(*_raised)


def _release() -> None:
    global _holders, _found, _raised
    with _lock:
        _holders -= 1
        if _holders == 0:
            if _found is not None and gc.get_threshold() == _raised:
                gc.set_threshold(*_found)
            _found = _raised = None


def holders() -> int:
    """How many supervisors' bursts hold the raised threshold now (for tests)."""
    with _lock:
        return _holders


class BurstCollections:
    """One supervisor's bursts. Used on the supervisor's thread only (the process-wide
    threshold has its own lock)."""

    __slots__ = ("active", "check_armed", "enabled", "last", "wait_for_full", "wakes")

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.active = False
        self.wakes = 0
        """Crews woken in the running burst."""
        self.last = 0.0
        """When the running burst's last batch was woken (a monotonic clock)."""
        self.check_armed = False
        self.wait_for_full: int | None = None
        """After a burst ended at :data:`BURST_MAX_WAKES`: the count of CPython's full
        collections then; no burst starts before it grew."""

    def woke(self, count: int, now: float) -> bool:
        """A batch of ``count`` due crews was woken at ``now``. ``True`` when the caller
        must call :meth:`check` at :data:`BURST_QUIET` from now (no check pending)."""
        if not self.enabled or count <= 0:
            return False
        if not self.active:
            if self.wait_for_full is not None:
                if _full_collections() == self.wait_for_full:
                    return False
                self.wait_for_full = None
            _hold()
            self.active = True
            self.wakes = 0
        self.wakes += count
        self.last = now
        if self.wakes >= BURST_MAX_WAKES:
            self.end()
            self.wait_for_full = _full_collections()
            return False
        if self.check_armed:
            return False
        self.check_armed = True
        return True

    def check(self, now: float) -> float | None:
        """The quiet timer fired at ``now``: end the burst if no batch came for
        :data:`BURST_QUIET` seconds, else return when to check again."""
        self.check_armed = False
        if not self.active:
            return None
        if now - self.last >= BURST_QUIET:
            self.end()
            return None
        self.check_armed = True
        return self.last + BURST_QUIET

    def end(self) -> None:
        """Put the thresholds back (if this supervisor's burst held them)."""
        if self.active:
            self.active = False
            _release()
