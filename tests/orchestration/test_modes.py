"""Each orchestration mode on scripted agents and a virtual clock."""

from __future__ import annotations

import json

import pytest

from orkeon_actors.crew import Agent, CrewStatus, ScriptedModel, respond
from orkeon_actors.crew.mode_state import (
    AutonomousState,
    ConsensualState,
    GraphState,
    HierarchicalState,
    ParallelState,
    SequentialState,
)
from orkeon_actors.orchestration import END, Branch, Consensual, Edge, Graph, Parallel
from orkeon_actors.sim import Simulation
from orkeon_actors.sim.examples import EXAMPLES, run_example


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_completes(name: str) -> None:
    sim, crew = run_example(name)
    try:
        status, result, failure = sim.result().crews[crew]
        assert status is CrewStatus.COMPLETED, failure
        assert result
    finally:
        sim.stop()


def test_sequential_state_keeps_inputs_and_outputs() -> None:
    sim, crew = run_example("sequential")
    try:
        state = sim.snapshot(crew).orchestration
        assert isinstance(state, SequentialState)
        assert state.current_task_index == 2
        assert [(r.agent_id, r.output) for r in state.completed] == [
            ("writer", "draft: actors are data"),
            ("editor", "edited(draft: actors are data)"),
        ]
        assert sim.result().virtual_time == pytest.approx(60.0)  # the writer's wait expired, in no wall time
    finally:
        sim.stop()


def test_hierarchical_delegates_over_the_hub_and_aggregates() -> None:
    sim, crew = run_example("hierarchical")
    try:
        state = sim.snapshot(crew).orchestration
        assert isinstance(state, HierarchicalState)
        assert state.manager.phase == "done" and len(state.manager.plan) == 2
        assert {w: [r.output for r in d.partial_results] for w, d in state.workers.items()} == {
            "r1": ["r1 found prices"],
            "r2": ["r2 found reviews"],
        }
        kinds = [e.detail for e in sim.trace.events() if e.kind == "message"]
        assert any("_system.post" in d for d in kinds)  # sub-tasks and results travelled as posts
    finally:
        sim.stop()


def test_parallel_quorum_cancels_the_waiting_branch() -> None:
    with Simulation() as sim:
        crew = EXAMPLES["parallel"](sim)
        sim.run(until=1)
        state = sim.snapshot(crew).orchestration
        assert isinstance(state, ParallelState)
        assert {b: s.status for b, s in state.branches.items()} == {
            "b1": "Done",
            "b2": "WaitingForMessage",
            "b3": "Done",
        }
        assert state.join is not None and state.join.result == "score 7"


def test_parallel_all_waits_for_every_branch() -> None:
    with Simulation() as sim:
        agents = [Agent(f"a{i}", ScriptedModel([f"r{i}"])) for i in range(3)]
        crew = sim.spawn(
            "p", agents=agents, orchestration=Parallel([Branch(f"b{i}", f"a{i}", "t") for i in range(3)], join="all")
        )
        sim.run()
        assert sim.result().crews[crew][1] == "r0\nr1\nr2"


def test_consensual_rounds_and_no_consensus() -> None:
    sim, crew = run_example("consensual")
    try:
        state = sim.snapshot(crew).orchestration
        assert isinstance(state, ConsensualState)
        assert state.round == 2 and state.proposal.status == "accepted" and len(state.cast_votes) == 6
    finally:
        sim.stop()
    with Simulation() as sim:
        voters = [Agent(f"v{i}", ScriptedModel(policy=lambda r: respond("reject no"))) for i in range(2)]
        crew = sim.spawn(
            "c", agents=voters, orchestration=Consensual(["v0", "v1"], "p", rule="unanimity", max_rounds=2)
        )
        sim.run()
        assert json.loads(sim.result().crews[crew][1] or "")["decision"] == "no_consensus"


def test_graph_history_and_cycle_breaker() -> None:
    sim, crew = run_example("graph")
    try:
        state = sim.snapshot(crew).orchestration
        assert isinstance(state, GraphState)
        assert state.current_node == END and state.state_vars["quality"] == 3
        assert [(t.source, t.target) for t in state.history][:3] == [
            ("draft", "review"),
            ("review", "draft"),
            ("draft", "review"),
        ]
    finally:
        sim.stop()
    with Simulation() as sim:
        loop = Agent("x", ScriptedModel(policy=lambda r: respond("{}")))
        crew = sim.spawn(
            "loop",
            agents=[loop],
            orchestration=Graph({"a": "x", "b": "x"}, [Edge("a", "b"), Edge("b", "a")], start="a", max_cycles=3),
        )
        sim.run()
        status, _, failure = sim.result().crews[crew]
        assert status is CrewStatus.FAILED and failure.error_type == "GraphCycleLimitError"
        assert "max_cycles=3" in failure.message


def test_autonomous_tree_depth_and_budgets() -> None:
    sim, crew = run_example("autonomous")
    try:
        state = sim.snapshot(crew).orchestration
        assert isinstance(state, AutonomousState)
        assert [(n.agent_id, n.parent, n.depth) for n in state.spawned.nodes] == [
            ("root", None, 0),
            ("root.1", "root", 1),
            ("root.1.2", "root.1", 2),
        ]
        assert state.current_depth == 2 and state.pending == ()
        assert set(state.budgets) == {"root", "root.1", "root.1.2"}
    finally:
        sim.stop()
