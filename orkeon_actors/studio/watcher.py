"""Lifecycle events for the Studio's message flow: wakes, sleeps, completions, failures.

:class:`LifecycleWatcher` is one daemon thread that, while a browser watches, reads the crews'
states (``states()``: the store's sleeping crews and every supervisor's
``CrewSupervisor.crews()``, :meth:`LiveSource.crew_states`) every ``interval`` seconds
and emits the changes since the last read as feed events: ``wake`` (Asleep or Activating to
Active), ``sleep`` (to Snapshotting or Asleep) and ``state`` (anything else, such as
Completed or Failed). The first read after a browser attaches is the baseline: the states
a crew already had are not changes, so nothing is emitted for them (a crew that first appears
later, a new spawn, is a ``state`` event). It reads through the supervisors' public API and the store's
read-only view only, and never touches crews; while nobody watches it reads nothing. A change shorter than one
interval can be missed (the crews view, read on demand, is exact).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from orkeon_actors.lifecycle.ports import LifecycleState
from orkeon_actors.model.clock import Clock
from orkeon_actors.studio.feed import StudioFeed, event

__all__ = ["LifecycleWatcher", "transition_kind"]

_SLEEPING = frozenset({LifecycleState.SNAPSHOTTING, LifecycleState.ASLEEP})


def transition_kind(before: LifecycleState | None, after: LifecycleState) -> str:
    """The feed ``kind`` of a change from ``before`` to ``after`` (``before`` ``None``: the
    crew's first sighting since a browser attached, always ``state``)."""
    if before is None:
        return "state"
    if after is LifecycleState.ACTIVE and before in (LifecycleState.ASLEEP, LifecycleState.ACTIVATING):
        return "wake"
    if after in _SLEEPING:
        return "sleep"
    return "state"


class LifecycleWatcher:
    """Polls ``supervisors()`` while ``feed`` has a subscriber (see the module docstring)."""

    def __init__(
        self,
        feed: StudioFeed,
        states: Callable[[], Mapping[str, LifecycleState]],
        clock: Clock,
        *,
        interval: float = 0.25,
    ) -> None:
        self.feed = feed
        self.states = states
        self.clock = clock
        self.interval = interval
        self._known: dict[str, LifecycleState] = {}
        self.baseline_taken = threading.Event()
        """Set once the states at attach time were read (cleared when nobody watches)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="orkeon-studio-lifecycle", daemon=True)
        self._thread.start()

    def poll(self) -> None:
        """Read the states once and emit what changed (nothing on the first read since a
        browser attached: that read is the baseline)."""
        now = dict(self.states())
        at = self.clock.now()
        if not self.baseline_taken.is_set():
            self._known = now
            self.baseline_taken.set()
            return
        for crew, state in now.items():
            before = self._known.get(crew)
            if before is not state:
                self.feed.emit(
                    event(
                        transition_kind(before, state),
                        at,
                        crew=crew,
                        from_state=None if before is None else before.value,
                        to_state=state.value,
                    )
                )
        self._known = now

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.feed.watching:
                self.poll()
            else:
                self._known.clear()
                self.baseline_taken.clear()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
