"""``Simulation``: crews with scripted agents on a virtual clock.

::

    with Simulation(seed=7) as sim:
        sim.spawn("writers", agents=[...], orchestration=Sequential([...]))
        sim.run(until=3600)            # virtual seconds
        print(sim.trace.timeline())

``run`` repeats: wait until every crew is quiescent (no actor message in flight, every
mailbox actor drained, nothing changed meanwhile), stop if every crew finished, else jump
the clock to the next timer (a finite wait's expiry, a budget deadline), never past
``until``. Finite waits therefore expire at once in wall time. The trace is in canonical
order and free of random ids: same seed and same crews give the same trace.

``seed`` feeds :attr:`Simulation.rng` (hand it to policy functions) and the crew ids
(``{name}-{n}``), so nothing in a run depends on the wall clock.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import pykka

from orkeon_actors.crew.agent import Agent
from orkeon_actors.crew.crew_actor import Activity, CrewActor, query_crew, start_crew
from orkeon_actors.crew.snapshot import CrewSnapshot
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.hub.async_wait import flush_mailboxes
from orkeon_actors.model.clock import VirtualClock
from orkeon_actors.orchestration.base import Orchestration
from orkeon_actors.runtime import Runtime
from orkeon_actors.sim.trace import Trace
from orkeon_actors.testing import wait_until

__all__ = ["Simulation", "SimulationResult"]

FINISHED = (CrewStatus.COMPLETED, CrewStatus.FAILED)


class SimulationResult:
    """Per crew: status, result, failure."""

    def __init__(self, crews: dict[str, tuple[CrewStatus, str | None, Any]], virtual_time: float) -> None:
        self.crews = crews
        self.virtual_time = virtual_time

    @property
    def all_completed(self) -> bool:
        return all(status is CrewStatus.COMPLETED for status, _, _ in self.crews.values())

    def __repr__(self) -> str:
        return f"SimulationResult({self.crews!r}, t={self.virtual_time})"


class Simulation:
    """A runtime on a :class:`VirtualClock`, the crews spawned in it, and their trace."""

    def __init__(self, seed: int = 0, *, runtime: Runtime | None = None, quiet_timeout: float = 30.0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = VirtualClock()
        self.runtime = runtime or Runtime.start(clock=self.clock)
        if not self.runtime.clock.is_virtual:
            raise ValueError("a Simulation needs a runtime on a VirtualClock")
        self.clock = self.runtime.clock  # type: ignore[assignment]
        self._origin = self.clock.monotonic()
        self.trace = Trace(lambda: self.clock.monotonic() - self._origin)
        self.activity = Activity()
        self.crews: dict[str, pykka.ActorRef[Any]] = {}
        self._counter = 0
        self.quiet_timeout = quiet_timeout

    def spawn(
        self,
        name: str,
        *,
        agents: Sequence[Agent],
        orchestration: Orchestration,
        crew_class: type[CrewActor] = CrewActor,
        **options: Any,
    ) -> str:
        """Start a crew; returns its crew id (``{name}-{n}``, deterministic)."""
        self._counter += 1
        crew_id = options.pop("crew_id", None) or f"{name}-{self._counter}"
        ref = crew_class.start(
            self.runtime.hub,
            agents=agents,
            orchestration=orchestration,
            name=name,
            crew_id=crew_id,
            observer=self.trace,
            activity=self.activity,
            **options,
        )
        self.crews[crew_id] = ref
        start_crew(ref, self.activity)
        return str(crew_id)

    # -- running -----------------------------------------------------------------------

    def wait_quiescent(self) -> None:
        """Block until nothing is in flight anywhere in the simulation."""
        while True:
            wait_until(lambda: self.activity.in_flight == 0, self.quiet_timeout, "crews to go quiet")
            before = self.activity.sequence
            flush_mailboxes(self.runtime.hub)
            for ref in list(self.crews.values()):
                query_crew(ref, "status")
            if self.activity.in_flight == 0 and self.activity.sequence == before:
                return

    def statuses(self) -> dict[str, CrewStatus]:
        return {crew: query_crew(ref, "status") for crew, ref in self.crews.items()}

    def run(self, until: float | None = None) -> SimulationResult:
        """Run until every crew finished, or nothing can happen before virtual time
        ``until`` (seconds from the start; ``None``: until no timer is left)."""
        limit = None if until is None else self._origin + until
        while True:
            self.wait_quiescent()
            if all(status in FINISHED for status in self.statuses().values()):
                break
            deadline = self.runtime.scheduler.next_deadline()
            if deadline is None or (limit is not None and deadline > limit):
                if limit is not None and self.clock.monotonic() < limit:
                    self.clock.advance_to(limit)
                    self.wait_quiescent()
                break
            self.clock.advance_to(deadline)
        return self.result()

    def advance(self, seconds: float) -> None:
        """Move virtual time and let the crews react."""
        self.clock.advance(seconds)
        self.wait_quiescent()

    def result(self) -> SimulationResult:
        crews = {crew: query_crew(ref, "summary") for crew, ref in self.crews.items()}
        return SimulationResult(crews, self.clock.monotonic() - self._origin)

    def snapshot(self, crew_id: str) -> CrewSnapshot:
        snap: CrewSnapshot = query_crew(self.crews[crew_id], "snapshot")
        return snap

    def stop(self) -> None:
        for ref in self.crews.values():
            ref.stop()
        self.crews.clear()
        self.runtime.stop()

    def __enter__(self) -> Simulation:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
