"""``Simulation``: crews with scripted agents on a virtual clock.

::

    with Simulation(seed=7) as sim:
        sim.spawn("writers", agents=[...], orchestration=Sequential([...]))
        sim.run(until=3600)            # virtual seconds
        print(sim.trace.timeline())

``run`` repeats: release the crews' held deliveries one at a time until everything is
quiescent (see :mod:`orkeon_actors.sim.gate`), stop if every crew finished, else jump the
clock to the next timer (a finite wait's expiry, a budget deadline), never past
``until``. Finite waits therefore expire at once in wall time.

Determinism: crews run one delivery at a time, in an order derived from virtual time and
the causal order of submissions, never from thread timing; the hub's mailboxes run
inline. So the same seed and the same crews give the same :meth:`Trace.events` (in
recording order) and the same results, run after run. Ids minted at random (message,
correlation and wait ids) are redacted from the trace; they never decide an order.

``seed`` feeds :attr:`Simulation.rng` (hand it to policy functions: with one crew running
at a time, the draws happen in the same order every run) and the crew ids
(``{name}-{n}``), so nothing in a run depends on the wall clock.

A simulated crew must not block its thread (no real I/O, no sleeps, no waiting on another
crew from a policy or tool): the gate waits for it, and raises
:class:`~orkeon_actors.sim.gate.SimulationStuckError` after ``quiet_timeout`` seconds.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import pykka

from orkeon_actors.crew.agent import Agent
from orkeon_actors.crew.crew_actor import Activity, CrewActor, query_crew, restore_crew, start_crew
from orkeon_actors.crew.orchestration import Orchestration
from orkeon_actors.crew.snapshot import CrewSnapshot
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.hub.async_wait import flush_mailboxes
from orkeon_actors.hub.memory import InMemoryEventHub
from orkeon_actors.model.clock import VirtualClock
from orkeon_actors.runtime import Runtime
from orkeon_actors.sim.gate import SerialGate
from orkeon_actors.sim.trace import Trace

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
        if not isinstance(self.runtime.hub, InMemoryEventHub):
            raise ValueError("a Simulation needs an in-memory hub (Runtime.start(clock=VirtualClock()))")
        # Mailboxes registered from now on run inline: no mailbox thread races the crews.
        self.runtime.hub.inline_mailboxes = True
        self.clock = self.runtime.clock  # type: ignore[assignment]
        self._origin = self.clock.monotonic()
        self.trace = Trace(lambda: self.clock.monotonic() - self._origin)
        self.activity = Activity()
        self.quiet_timeout = quiet_timeout
        self.gate = SerialGate(self.activity, timeout=quiet_timeout)
        self.crews: dict[str, pykka.ActorRef[Any]] = {}
        self._counter = 0

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
            gate=self.gate,
            **options,
        )
        self.crews[crew_id] = ref
        start_crew(ref, gate=self.gate)  # held: the crew starts when the simulation runs
        return str(crew_id)

    def restore(
        self,
        snapshot: CrewSnapshot,
        *,
        agents: Sequence[Agent],
        orchestration: Orchestration,
        crew_class: type[CrewActor] = CrewActor,
        **options: Any,
    ) -> str:
        """Recompose a crew from ``snapshot`` (its agents and orchestration are code:
        pass the same definitions), as a wake does. A live crew with the same id is
        stopped first (its mailboxes closed: what they held is gone; the snapshot's
        inboxes and cursors are restored). Returns the crew id."""
        crew_id = str(snapshot.id)
        old = self.crews.pop(crew_id, None)
        if old is not None:
            old.stop()
        ref = crew_class.start(
            self.runtime.hub,
            agents=agents,
            orchestration=orchestration,
            name=snapshot.name,
            crew_id=crew_id,
            observer=self.trace,
            activity=self.activity,
            gate=self.gate,
            **options,
        )
        self.crews[crew_id] = ref
        restore_crew(ref, snapshot, gate=self.gate)
        return crew_id

    # -- running -----------------------------------------------------------------------

    def wait_quiescent(self) -> None:
        """Release held deliveries one at a time until nothing is held or in flight
        anywhere in the simulation (at the current virtual time)."""
        while True:
            self.gate.release_all()
            before = self.gate.submitted
            flush_mailboxes(self.runtime.hub)  # mailbox actors of a runtime passed in, if any
            if self.gate.submitted == before and not len(self.gate):
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
