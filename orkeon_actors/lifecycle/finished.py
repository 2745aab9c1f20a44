"""Blocking until a supervised crew finishes, built on the non-blocking primitive.

``CrewSupervisor.when_finished(crew_id, callback)`` (see
:mod:`orkeon_actors.store.outcome_book`) calls back once the crew's outcome is durable;
:func:`wait_finished` parks the calling thread on that callback with the crews' one
waiting rule (:func:`orkeon_actors.crew.finished.await_outcome`, also behind
``orkeon_actors.crew.wait_finished(ref)`` for a crew run without a supervisor). An
asyncio facade awaits the same callback without a thread
(``loop.call_soon_threadsafe(future.set_result, o)``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from orkeon_actors.crew.finished import FinishWatcher, await_outcome, finish_timeout
from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.errors import CrewNotFoundError
from orkeon_actors.lifecycle.ports import LifecycleState
from orkeon_actors.model.ids import CrewId

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor import CrewSupervisor

__all__ = ["refuse_unknown", "wait_finished"]


def wait_finished(sup: CrewSupervisor, crew_id: CrewId, timeout: float | timedelta | None) -> CrewOutcome:
    """Block until ``crew_id`` finishes under ``sup``; see ``CrewSupervisor.wait_finished``."""
    seconds = finish_timeout(timeout)

    def register(callback: FinishWatcher, _deadline: float | None) -> Callable[[], None]:
        told = threading.Event()

        def on_finished(outcome: CrewOutcome) -> None:
            told.set()
            callback(outcome)

        withdraw = sup.when_finished(crew_id, on_finished)
        try:
            refuse_unknown(sup, crew_id, told.is_set)
        except CrewNotFoundError:
            withdraw()
            raise
        return withdraw

    return await_outcome(lambda: str(crew_id), register, seconds, lambda: sup.state(crew_id).value.lower())


def refuse_unknown(sup: CrewSupervisor, crew_id: CrewId, told: Callable[[], bool]) -> None:
    """Raise ``CrewNotFoundError`` if ``crew_id`` was never spawned under ``sup``; call it
    after registering a ``when_finished`` callback, ``told()`` saying whether that
    callback ran (a crew's actor stops, its state going ``Unknown``, only once its
    outcome is durable and its callbacks called)."""
    if not told() and sup.state(crew_id) is LifecycleState.UNKNOWN and not told():
        raise CrewNotFoundError(
            f"no crew {crew_id} is running, asleep or finished under this supervisor: check the id, "
            "or spawn it first (sup.spawn(name, crew_id))"
        )
