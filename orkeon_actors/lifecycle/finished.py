"""Blocking until a supervised crew finishes, built on the non-blocking primitive.

``CrewSupervisor.when_finished(crew_id, callback)`` (see
:mod:`orkeon_actors.lifecycle.outcomes`) calls back once the crew's outcome is durable;
:func:`wait_finished` parks the calling thread on that callback. An asyncio facade awaits
the same callback without a thread (``loop.call_soon_threadsafe(future.set_result, o)``).
"""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING

from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import CrewFailedError, CrewNotFoundError, CrewWaitTimeoutError, InvalidArgumentError
from orkeon_actors.lifecycle.ports import LifecycleState
from orkeon_actors.model.ids import CrewId

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor import CrewSupervisor

__all__ = ["settle_finished", "wait_finished"]


def wait_finished(sup: CrewSupervisor, crew_id: CrewId, timeout: float | None) -> CrewOutcome:
    """Block until ``crew_id`` finishes under ``sup``; see ``CrewSupervisor.wait_finished``."""
    if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
        raise InvalidArgumentError(
            f"wait_finished timeout must be a positive number of seconds or None, got {timeout!r}"
        )
    done: Future[CrewOutcome] = Future()
    withdraw = sup.when_finished(crew_id, done.set_result)
    try:
        if not done.done() and sup.state(crew_id) is LifecycleState.UNKNOWN and not done.done():
            raise CrewNotFoundError(
                f"no crew {crew_id} is running, asleep or finished under this supervisor: check the id, "
                "or spawn it first (sup.spawn(name, crew_id))"
            )
        try:
            outcome = done.result(timeout)
        except FutureTimeout:
            raise CrewWaitTimeoutError(
                f"crew {crew_id} did not finish within {timeout:g} s; it is still "
                f"{sup.state(crew_id).value.lower()}: wait again, or stop it"
            ) from None
    finally:
        withdraw()
    return settle_finished(crew_id, outcome)


def settle_finished(crew_id: CrewId, outcome: CrewOutcome) -> CrewOutcome:
    """The outcome of a completed crew; raises ``CrewFailedError`` for a failed one."""
    if outcome.status is CrewStatus.FAILED:
        raise CrewFailedError(
            f"crew {crew_id} failed: {outcome.failure or 'no failure recorded'}; its final state is in "
            "error.outcome.final_snapshot() (and `orkeon store PATH show CREW` while it is kept)",
            crew_id=str(crew_id),
            failure=outcome.failure,
            outcome=outcome,
        )
    return outcome
