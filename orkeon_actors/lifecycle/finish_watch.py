"""Callbacks waiting for crews to finish: the non-blocking half of "wait until crew X
is done" (:meth:`CrewSupervisor.when_finished`).

The supervisor actor owns a :class:`FinishWatchers` and drives it on its own thread:
it adds a watcher there (so a crew that finished meanwhile is seen) and fires the
watchers of a crew once its outcome is known, after its actor stopped. Each callback
runs exactly once, on the supervisor's thread: it must be short and must not block
(complete a future, tell an actor, ``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from loguru import logger

from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.model.ids import CrewId

__all__ = ["FinishCallback", "FinishWatchers"]

FinishCallback = Callable[[CrewOutcome], None]


class FinishWatchers:
    """The pending finish callbacks, per crew. Not thread-safe: one owner thread."""

    __slots__ = ("_keys", "_watchers")

    def __init__(self) -> None:
        self._watchers: dict[CrewId, dict[int, FinishCallback]] = {}
        self._keys = itertools.count()

    def add(self, crew_id: CrewId, callback: FinishCallback) -> int:
        """Register ``callback`` for ``crew_id``'s outcome; returns a key for :meth:`remove`."""
        key = next(self._keys)
        self._watchers.setdefault(crew_id, {})[key] = callback
        return key

    def remove(self, crew_id: CrewId, key: int) -> None:
        """Forget one callback (idempotent)."""
        callbacks = self._watchers.get(crew_id)
        if callbacks is not None:
            callbacks.pop(key, None)
            if not callbacks:
                del self._watchers[crew_id]

    def fire(self, crew_id: CrewId, outcome: CrewOutcome) -> None:
        """Hand ``outcome`` to every callback waiting for ``crew_id``, once each. A
        callback that raises is logged; the others still run."""
        for callback in self._watchers.pop(crew_id, {}).values():
            try:
                callback(outcome)
            except Exception:
                logger.exception("a when_finished callback for crew {} raised", crew_id)

    def __len__(self) -> int:
        return sum(len(c) for c in self._watchers.values())
