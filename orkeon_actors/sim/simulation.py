"""``Simulation``: crews with scripted agents on a virtual clock, run by one seeded scheduler.

::

    with Simulation(seed=7) as sim:
        sim.spawn("writers", agents=[...], orchestration=Sequential([...]))
        sim.run(until=3600)            # virtual seconds
        print(sim.trace.timeline())

Everything of a simulation runs on the thread that drives it, through the actor runtime's
executor seam (:mod:`orkeon_actors.actors.executor`): its runtime, crews and mailboxes are
started inside an executor scope of its :class:`~orkeon_actors.sim.scheduler.DeterministicScheduler`,
so every actor turn and every timer is a task of that scheduler, and no pool thread,
mailbox thread or timer thread exists. Crews run their own code, unchanged.

``run`` repeats: run ready tasks, one at a time, the seed choosing among those ready at
one virtual instant, until none is left; stop if every crew finished; else move the clock
to the next timer (a finite wait's expiry, a send's timeout, a budget deadline, a
delayed delivery), never past ``until``. Finite waits therefore expire at once in wall
time.

Determinism: the schedule is a function of the seed and the crews alone (see
:mod:`orkeon_actors.sim.scheduler`), so the same seed gives the same
:meth:`Trace.events`, in recording order, and the same :meth:`Trace.to_json` byte for byte,
run after run and process after process; another seed may interleave deliveries that are
ready at one instant differently. Ids minted at random (message, correlation and wait ids)
are redacted from the trace; they never decide an order.

``seed`` also feeds :attr:`Simulation.rng` (hand it to policy functions: the draws happen
in the same order every run), the fault draws (``faults=``, :mod:`orkeon_actors.sim.faults`)
and the crew ids (``{name}-{n}``), so nothing in a run depends on the wall clock.

A simulated crew must not block its thread (no real I/O, no sleeps, no waiting on another
crew from a policy or tool): there is only one thread. An ``ask`` that nothing left can
answer raises :class:`~orkeon_actors.sim.scheduler.SimulationStuckError`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import attrs
import pykka

from orkeon_actors.actors.executor import executor_scope
from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.crew.agent import Agent
from orkeon_actors.crew.crew_actor import CrewActor, query_crew, restore_crew, start_crew
from orkeon_actors.crew.mode import Orchestration
from orkeon_actors.crew.snapshot import CrewSnapshot
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.pipeline import EventHubMiddleware
from orkeon_actors.model.clock import VirtualClock
from orkeon_actors.model.ids import CrewId
from orkeon_actors.runtime import Runtime
from orkeon_actors.sim.faults import FaultInjector, Faults, FaultyModel
from orkeon_actors.sim.scheduler import DeterministicScheduler, Task, task_owner
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


@attrs.frozen
class _Definition:
    """What a crew was spawned from: a restore recomposes it from the same code."""

    agents: tuple[Agent, ...]
    orchestration: Orchestration
    crew_class: type[CrewActor]
    options: dict[str, Any]


class Simulation:
    """A runtime on a :class:`VirtualClock` driven by a seeded scheduler, the crews spawned
    in it, and their trace (module docstring)."""

    def __init__(
        self, seed: int = 0, *, faults: Faults | None = None, middleware: Sequence[EventHubMiddleware] = ()
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.scheduler = DeterministicScheduler(seed)
        self.clock = VirtualClock()
        self._origin = self.clock.monotonic()
        self.trace = Trace(lambda: self.clock.monotonic() - self._origin)
        self.faults = faults or Faults()
        self.injector = FaultInjector(
            self.faults, seed, lambda crew, agent, detail: self.trace.record(crew, agent, "fault", detail)
        )
        stages = [*middleware, *([self.injector] if self.faults.drop_replies > 0 else [])]
        with executor_scope(self.scheduler):
            self.runtime = Runtime.start(clock=self.clock, middleware=stages)
        self.crews: dict[str, pykka.ActorRef[Any]] = {}
        self._definitions: dict[str, _Definition] = {}
        self._status: dict[str, CrewStatus] = {}
        self._parked: list[str] = []  # crews that just parked every agent (a snapshot point)
        self._new_parks: set[str] = set()  # crews an agent of which parked since their last snapshot point
        self._restored: set[str] = set()  # restored, not parked again since (no new snapshot point yet)
        self._counter = 0
        self._crashing = False
        self._observing = False  # a query of the harness is running (no delay fault then)
        if self.faults.delay > 0:
            self.scheduler.interceptor = self._maybe_delay
        if self.faults.crashes > 0:
            self.scheduler.on_step = self._maybe_crash
        self.scheduler.when_idle = self._next_timer

    def _next_timer(self) -> bool:
        """An ask waits in virtual time: move the clock to the next timer, if any."""
        deadline = self.runtime.scheduler.next_deadline()
        if deadline is None:
            return False
        self.clock.advance_to(deadline)
        return self.scheduler.ready > 0 or self.runtime.scheduler.next_deadline() is not None

    @contextmanager
    def _driving(self) -> Iterator[None]:
        with executor_scope(self.scheduler):
            yield

    @contextmanager
    def _querying(self) -> Iterator[None]:
        """Asks of the harness itself (status, summary, snapshot): they observe the run
        and are never delayed by a fault."""
        observing, self._observing = self._observing, True
        try:
            with executor_scope(self.scheduler):
                yield
        finally:
            self._observing = observing

    # -- crews ------------------------------------------------------------------------

    def spawn(
        self,
        name: str | CrewBlueprint,
        *,
        agents: Sequence[Agent] = (),
        orchestration: Orchestration | None = None,
        crew_class: type[CrewActor] = CrewActor,
        **options: Any,
    ) -> str:
        """Start a crew; returns its crew id (``{name}-{n}``, deterministic). It begins
        when the simulation runs. ``name`` may be a
        :class:`~orkeon_actors.config.CrewBlueprint` instead (then give no agents or
        orchestration; ``tools=`` resolves the tool names it declares)."""
        self._counter += 1
        if isinstance(name, CrewBlueprint):
            from orkeon_actors.config.launch import register_declarations
            from orkeon_actors.config.materialize import crew_actor_options

            blueprint, tools = name, options.pop("tools", None)
            crew_id = str(options.pop("crew_id", None) or f"{blueprint.name}-{self._counter}")
            register_declarations(self.runtime.hub, blueprint, CrewId(crew_id))
            built = crew_actor_options(blueprint, CrewId(crew_id), tools)
            agents, orchestration, name = built.pop("agents"), built.pop("orchestration"), blueprint.name
            del built["name"], built["crew_id"]
            options = {**built, **options}
        else:
            if orchestration is None:
                raise TypeError("spawn(name, agents=..., orchestration=...) or spawn(blueprint)")
            crew_id = str(options.pop("crew_id", None) or f"{name}-{self._counter}")
        definition = _Definition(tuple(self._faulty(agents)), orchestration, crew_class, dict(options))
        with self._driving():
            ref = self._start(crew_id, name, definition)
            start_crew(ref)
        return crew_id

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
        definition = _Definition(tuple(self._faulty(agents)), orchestration, crew_class, dict(options))
        with self._driving():
            return self._restore(snapshot, definition)

    def _start(self, crew_id: str, name: str, definition: _Definition) -> pykka.ActorRef[Any]:
        ref = definition.crew_class.start(
            self.runtime.hub,
            agents=definition.agents,
            orchestration=definition.orchestration,
            name=name,
            crew_id=crew_id,
            observer=self,
            on_activity=self._on_activity,
            **definition.options,
        )
        self.crews[crew_id] = ref
        self._definitions[crew_id] = definition
        return ref

    def _restore(self, snapshot: CrewSnapshot, definition: _Definition) -> str:
        crew_id = str(snapshot.id)
        old = self.crews.pop(crew_id, None)
        if old is not None:
            old.stop()
        self._status.pop(crew_id, None)
        self._restored.add(crew_id)
        ref = self._start(crew_id, snapshot.name, definition)
        restore_crew(ref, snapshot)
        return crew_id

    def _faulty(self, agents: Sequence[Agent]) -> list[Agent]:
        if self.faults.model_errors == 0 and self.faults.budget_exhaustion == 0:
            return list(agents)
        return [attrs.evolve(a, model=FaultyModel(a.model, self.injector)) for a in agents]

    def record(self, crew_id: str, agent_id: str | None, kind: str, detail: str) -> None:
        """The crews' observer: every entry goes to :attr:`trace`; an agent's ``park``
        marks its crew's next wait for a message as a new snapshot point."""
        self.trace.record(crew_id, agent_id, kind, detail)
        if kind == "park":
            self._new_parks.add(crew_id)

    def _on_activity(self, crew_id: CrewId, status: CrewStatus) -> None:
        """Called on the crew's turn after each message it handled: the crew lane's
        status changes go to the trace. A crew that waits with every agent parked after
        an agent parked anew is at a snapshot point (crash faults): at its first park
        and at every later one (a wait re-armed after a timeout, each turn of a
        ``receive_message`` loop), whether or not its status changed in between."""
        key = str(crew_id)
        if self._status.get(key) is not status:
            self._status[key] = status
            self.trace.record(key, None, "status", status.value)
        if status is not CrewStatus.WAITING:
            return
        if key in self._restored:
            self._restored.discard(key)  # parked as restored: the snapshot it came from
            self._new_parks.discard(key)
        elif key in self._new_parks:
            self._new_parks.discard(key)
            self._parked.append(key)

    # -- faults -----------------------------------------------------------------------

    def _maybe_delay(self, task: Task) -> bool:
        """Hold a crew's turn back (a ``delay`` fault): only turns that deliver to a crew
        still working, never those answering the harness's own queries."""
        owner = task_owner(task)
        if not isinstance(owner, CrewActor) or self._observing or self._status.get(str(owner.crew_id)) in FINISHED:
            return False
        if not self.injector.draw(self.faults.delay):
            return False
        seconds = self.injector.delay_seconds()
        self.injector.note(str(owner.crew_id), None, f"delivery delayed {seconds:g}s")
        self.runtime.scheduler.schedule_in(seconds, lambda: self.scheduler.submit(task))
        return True

    def _maybe_crash(self) -> None:
        parked, self._parked = self._parked, []
        if self._crashing:
            return
        self._crashing = True
        try:
            for crew_id in parked:
                if self._status.get(crew_id) is not CrewStatus.WAITING or not self.injector.draw(self.faults.crashes):
                    continue
                snapshot = self.snapshot(crew_id)
                self.injector.note(crew_id, None, "crashed; restored from its last snapshot")
                self._restore(snapshot, self._definitions[crew_id])
        finally:
            self._crashing = False

    # -- running -----------------------------------------------------------------------

    def wait_quiescent(self) -> None:
        """Run ready tasks until none is left (at the current virtual time)."""
        with self._driving():
            self.scheduler.run_ready()

    def statuses(self) -> dict[str, CrewStatus]:
        with self._querying():
            return {crew: query_crew(ref, "status") for crew, ref in self.crews.items()}

    def _all_finished(self) -> bool:
        return all(self._status.get(crew) in FINISHED for crew in self.crews)

    def run(self, until: float | None = None) -> SimulationResult:
        """Run until every crew finished, or nothing can happen before virtual time
        ``until`` (seconds from the start, 0 or more; ``None``: until no timer is left).
        Raises ``InvalidArgumentError`` for a negative or non-finite ``until``."""
        if until is not None and not (math.isfinite(until) and until >= 0):
            raise InvalidArgumentError(
                f"until={until!r}: a run lasts 0 or more virtual seconds from the start (e.g. 3600)"
            )
        limit = None if until is None else self._origin + until
        with self._driving():
            while True:
                self.scheduler.run_ready()
                if self._all_finished():
                    break
                deadline = self.runtime.scheduler.next_deadline()
                if deadline is None or (limit is not None and deadline > limit):
                    if limit is not None and self.clock.monotonic() < limit:
                        self.clock.advance_to(limit)
                        self.scheduler.run_ready()
                    break
                self.clock.advance_to(deadline)
            return self.result()

    def advance(self, seconds: float) -> None:
        """Move virtual time (timer by timer, in deadline order) and let the crews react."""
        target = self.clock.monotonic() + seconds
        with self._driving():
            self.scheduler.run_ready()
            while (deadline := self.runtime.scheduler.next_deadline()) is not None and deadline <= target:
                self.clock.advance_to(deadline)
                self.scheduler.run_ready()
            self.clock.advance_to(target)
            self.scheduler.run_ready()

    def result(self) -> SimulationResult:
        with self._querying():
            crews = {crew: query_crew(ref, "summary") for crew, ref in self.crews.items()}
        return SimulationResult(crews, self.clock.monotonic() - self._origin)

    def snapshot(self, crew_id: str) -> CrewSnapshot:
        with self._querying():
            snap: CrewSnapshot = query_crew(self.crews[crew_id], "snapshot")
        return snap

    def stop(self) -> None:
        with self._driving():
            for ref in self.crews.values():
                ref.stop()
            self.crews.clear()
            self.runtime.stop()
            self.scheduler.run_ready()

    def __enter__(self) -> Simulation:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
