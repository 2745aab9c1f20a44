"""One small runnable crew per orchestration mode, with scripted agents.

Each ``build_<mode>(sim)`` spawns its crew(s) in a :class:`Simulation` and returns the
crew id; :data:`EXAMPLES` maps the mode name to it. ``examples/<mode>.py`` run them and
print the timeline; ``orkeon simulate <mode>`` does the same.

:data:`INVARIANTS` states, per mode, what must hold at the end of *every* run of its
example, whatever the seed and the injected faults: ``orkeon simulate MODE --seeds 1..500
--check NAME`` checks it over many seeds (:mod:`orkeon_actors.sim.sweep`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from orkeon_actors.crew.agent import Agent, BudgetLimits
from orkeon_actors.crew.model import ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.orchestration import (
    END,
    Autonomous,
    Branch,
    Condition,
    Consensual,
    Edge,
    Graph,
    Hierarchical,
    Parallel,
    Sequential,
    Task,
)
from orkeon_actors.orchestration.state import (
    AutonomousState,
    ConsensualState,
    GraphState,
    ParallelState,
    SequentialState,
)
from orkeon_actors.sim.faults import Faults
from orkeon_actors.sim.simulation import Simulation

__all__ = ["EXAMPLES", "INVARIANTS", "Invariant", "run_example"]

Invariant = Callable[[Simulation, str], "str | None"]
"""``check(sim, crew_id)`` after a run: ``None`` if it holds, else what went wrong."""

PARALLEL_QUORUM = 2
GRAPH_MAX_CYCLES = 5
AUTONOMOUS_MAX_DEPTH = 2


def build_sequential(sim: Simulation) -> str:
    """A writer drafts, waits (a minute, virtual) for a review request, an editor edits."""
    writer = Agent(
        "writer",
        ScriptedModel(
            [
                call("publish_event", {"topic": "drafts.ready", "payload": {"title": "Actors"}}),
                call("wait_for_event", {"topic": "reviews.requested", "timeout_ms": 60_000}),
                respond("draft: actors are data"),
            ]
        ),
        role="writer",
    )
    editor = Agent(
        "editor",
        ScriptedModel(policy=lambda req: respond("edited(" + json.loads(req.task)["previous"][0]["output"] + ")")),
        role="editor",
    )
    return sim.spawn(
        "newsroom",
        agents=[writer, editor],
        orchestration=Sequential([Task("write a draft", "writer"), Task("edit the draft", "editor")]),
    )


def build_hierarchical(sim: Simulation, mode: type[Hierarchical] = Hierarchical) -> str:
    """A manager splits a goal between two researchers over the hub, then aggregates.
    ``mode``: a ``Hierarchical`` subclass to run instead (a test plants a bug in one)."""
    plan = {"subtasks": [{"worker": "r1", "task": "prices"}, {"worker": "r2", "task": "reviews"}]}

    def manager(req: ModelRequest) -> ModelResponse:
        data = json.loads(req.task)
        if "results" in data:
            return respond("report: " + "; ".join(r["output"] for r in data["results"]))
        return respond(json.dumps(plan))

    def worker(name: str) -> ScriptedModel:
        return ScriptedModel(policy=lambda req: respond(f"{name} found {json.loads(req.task)['task']}"))

    return sim.spawn(
        "research",
        agents=[Agent("manager", ScriptedModel(policy=manager)), Agent("r1", worker("r1")), Agent("r2", worker("r2"))],
        orchestration=mode("manager", ["r1", "r2"], "compare laptops"),
    )


def build_parallel(sim: Simulation) -> str:
    """Three scorers in parallel; one waits for a market event; quorum of two joins."""
    fast = Agent("fast", ScriptedModel(["score 7"]))
    slow = Agent(
        "slow",
        ScriptedModel([call("wait_for_event", {"topic": "market.open", "timeout_ms": 30_000}), respond("score 5")]),
    )
    steady = Agent("steady", ScriptedModel(["score 7"]))
    return sim.spawn(
        "scoring",
        agents=[fast, slow, steady],
        orchestration=Parallel(
            [Branch("b1", "fast", "score"), Branch("b2", "slow", "score"), Branch("b3", "steady", "score")],
            join="quorum",
            quorum=PARALLEL_QUORUM,
            aggregation="majority",
        ),
    )


def build_consensual(sim: Simulation) -> str:
    """Three voters, supermajority; round 1 fails, the proposer revises, round 2 passes."""

    def voter(name: str, first: str) -> ScriptedModel:
        def policy(req: ModelRequest) -> ModelResponse:
            round_ = json.loads(req.task)["round"]
            return respond(first if round_ == 1 else "approve looks good now")

        return ScriptedModel(policy=policy)

    return sim.spawn(
        "council",
        agents=[
            Agent("v1", voter("v1", "approve fine")),
            Agent("v2", voter("v2", "reject too costly")),
            Agent("v3", voter("v3", "reject no tests")),
            Agent("proposer", ScriptedModel(policy=lambda req: respond("ship v2 with tests, half the cost"))),
        ],
        orchestration=Consensual(
            ["v1", "v2", "v3"], "ship v1", rule="supermajority", max_rounds=3, proposer="proposer"
        ),
    )


def build_graph(sim: Simulation) -> str:
    """draft -> review -> (draft again while quality < 3) -> publish -> END."""

    def drafter(req: ModelRequest) -> ModelResponse:
        state = json.loads(req.task)["state"]
        return respond(json.dumps({"quality": state.get("quality", 0) + 1}))

    return sim.spawn(
        "pipeline",
        agents=[
            Agent("drafter", ScriptedModel(policy=drafter)),
            Agent("reviewer", ScriptedModel(policy=lambda req: respond(json.dumps({"reviewed": True})))),
            Agent("publisher", ScriptedModel(policy=lambda req: respond(json.dumps({"published": True})))),
        ],
        orchestration=Graph(
            {"draft": "drafter", "review": "reviewer", "publish": "publisher"},
            [
                Edge("draft", "review"),
                Edge("review", "draft", Condition("quality", "<", 3)),
                Edge("review", "publish"),
                Edge("publish", END),
            ],
            start="draft",
            max_cycles=GRAPH_MAX_CYCLES,
        ),
    )


def build_autonomous(sim: Simulation) -> str:
    """A root agent delegates to a planner, which delegates to a coder (depth 2)."""

    def factory(role: str, depth: int) -> ScriptedModel:
        if role == "planner":
            return ScriptedModel(
                [call("delegate", {"role": "coder", "task": "write it"}), respond("plan done")], per_task=True
            )
        return ScriptedModel(["code written"])

    root = Agent(
        "root",
        ScriptedModel([call("delegate", {"role": "planner", "task": "plan the feature"}), respond("feature shipped")]),
        budget=BudgetLimits(max_tool_calls=10),
    )
    return sim.spawn(
        "startup",
        agents=[root],
        orchestration=Autonomous(
            "root", "build the feature", model_factory=factory, max_depth=AUTONOMOUS_MAX_DEPTH
        ),
    )


EXAMPLES: dict[str, Callable[[Simulation], str]] = {
    "sequential": build_sequential,
    "hierarchical": build_hierarchical,
    "parallel": build_parallel,
    "consensual": build_consensual,
    "graph": build_graph,
    "autonomous": build_autonomous,
}


# -- invariants ---------------------------------------------------------------------------

S = TypeVar("S")


def _state(sim: Simulation, crew: str, kind: type[S]) -> S:
    state = sim.snapshot(crew).orchestration
    if not isinstance(state, kind):
        raise TypeError(f"crew {crew} runs {type(state).__name__}, not the {kind.__name__} this invariant checks")
    return state


def _tasks_in_order(sim: Simulation, crew: str) -> str | None:
    done = [t.index for t in _state(sim, crew, SequentialState).completed]
    return None if done == list(range(len(done))) else f"tasks completed out of order: {done}"


def _each_subtask_once(sim: Simulation, crew: str) -> str | None:
    taken = [
        e.detail.split()[2]
        for e in sim.trace.events()
        if e.crew == crew and e.kind == "transition" and e.detail.startswith("partial result ")
    ]
    twice = sorted({t for t in taken if taken.count(t) > 1})
    return None if not twice else f"sub-tasks whose partial result was counted twice: {twice}"


def _quorum_join(sim: Simulation, crew: str) -> str | None:
    done = sum(1 for b in _state(sim, crew, ParallelState).branches.values() if b.status == "Done")
    status = sim.result().crews[crew][0]
    if (status is CrewStatus.COMPLETED) != (done >= PARALLEL_QUORUM):
        return f"crew {status.value} with {done} branches done (quorum {PARALLEL_QUORUM})"
    return None


def _voter_counted_once(sim: Simulation, crew: str) -> str | None:
    votes = [(v.round, str(v.agent_id)) for v in _state(sim, crew, ConsensualState).cast_votes]
    twice = sorted({v for v in votes if votes.count(v) > 1})
    return None if not twice else f"voters counted twice in one round: {twice}"


def _cycle_limit(sim: Simulation, crew: str) -> str | None:
    cycles = _state(sim, crew, GraphState).cycle_count
    return None if cycles <= GRAPH_MAX_CYCLES else f"{cycles} cycles, beyond max_cycles={GRAPH_MAX_CYCLES}"


def _depth_limit(sim: Simulation, crew: str) -> str | None:
    nodes = _state(sim, crew, AutonomousState).spawned.nodes
    deep = [str(n.agent_id) for n in nodes if n.depth > AUTONOMOUS_MAX_DEPTH]
    return None if not deep else f"agents deeper than max_depth={AUTONOMOUS_MAX_DEPTH}: {deep}"


INVARIANTS: dict[str, dict[str, Invariant]] = {
    "sequential": {"tasks-in-order": _tasks_in_order},
    "hierarchical": {"each-subtask-once": _each_subtask_once},
    "parallel": {"quorum-join": _quorum_join},
    "consensual": {"voter-counted-once": _voter_counted_once},
    "graph": {"cycle-limit": _cycle_limit},
    "autonomous": {"depth-limit": _depth_limit},
}
"""Per mode, named invariants of its example (module docstring): a consensual vote never
counts a voter twice; a graph never exceeds its cycle limit; a parallel join with quorum
q completes iff q branches finished; sequential tasks complete in order; a hierarchical
sub-task's result is counted once; an autonomous crew never spawns past its depth."""


def run_example(
    name: str, *, seed: int = 0, until: float = 3600.0, faults: Faults | None = None
) -> tuple[Simulation, str]:
    """Run example ``name`` to completion (or ``until`` virtual seconds); the caller
    stops the returned simulation."""
    if name not in EXAMPLES:
        raise KeyError(f"unknown example {name!r}; choose one of {', '.join(EXAMPLES)}")
    sim = Simulation(seed=seed, faults=faults)
    try:
        crew = EXAMPLES[name](sim)
        sim.run(until=until)
    except BaseException:
        sim.stop()
        raise
    return sim, crew
