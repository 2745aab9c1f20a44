"""Seeded fault injection: each kind happens, shows in the trace, and replays from its seed."""

from __future__ import annotations

import json

import pytest

from orkeon_actors.cli.main import main
from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.sim import Faults, Simulation
from orkeon_actors.sim.examples import EXAMPLES
from orkeon_actors.sim.sweep import run_seed, sweep


def _faults(sim: Simulation) -> list[str]:
    return [e.detail for e in sim.trace.events() if e.kind == "fault"]


def _ask_and_answer(sim: Simulation) -> str:
    """``asker`` waits a second, then sends a request to ``answerer``, who replies."""
    answerer = sim.spawn(
        "answerer",
        agents=[Agent("r", ScriptedModel(policy=_answer))],
        orchestration=Sequential([Task("answer one request", "r")]),
    )

    def ask(request: ModelRequest) -> ModelResponse:
        if request.turn == 0:
            return call("wait_for_event", {"topic": "never", "timeout_ms": 1_000})
        if request.turn == 1:
            return call("send_request", {"target_mailbox": f"agent://{answerer}/r", "payload": 1, "timeout_ms": 10_000})
        return respond(json.dumps(request.last_tool_result()))

    asker = Agent("q", ScriptedModel(policy=ask))
    return sim.spawn("asker", agents=[asker], orchestration=Sequential([Task("t", "q")]))


def _answer(request: ModelRequest) -> ModelResponse:
    if request.turn == 0:
        return call("receive_message", {"wait_forever": True})
    if request.turn == 1:
        correlation = request.last_tool_result()["message"]["correlation_id"]
        return call("reply_to", {"correlation_id": correlation, "payload": "yes"})
    return respond("replied")


def test_a_lost_reply_times_the_request_out_and_the_replier_never_knows() -> None:
    with Simulation(seed=0) as sim:
        asker = _ask_and_answer(sim)
        answer = json.loads(sim.run().crews[asker][1])
        assert answer["timed_out"] is False and answer["response_payload"] == "yes"
    with Simulation(seed=0, faults=Faults(drop_replies=1.0)) as sim:
        asker = _ask_and_answer(sim)
        result = sim.run()
        assert json.loads(result.crews[asker][1])["timed_out"] is True
        assert result.virtual_time == 11.0  # the 1 s wait, then the 10 s request timeout
        assert [c for c, (_, value, _) in result.crews.items() if value == "replied"]  # the replier succeeded
        assert _faults(sim) == ["reply from answerer-1 lost"]


def test_delayed_deliveries_take_virtual_time_and_keep_the_result() -> None:
    with Simulation(seed=3, faults=Faults(delay=0.5, max_delay=2.0)) as sim:
        crew = EXAMPLES["hierarchical"](sim)
        result = sim.run()
        delays = [d for d in _faults(sim) if d.startswith("delivery delayed")]
        assert delays
        assert 0 < result.virtual_time <= 2.0 * len(delays)
        assert result.crews[crew][:2] == (CrewStatus.COMPLETED, "report: r1 found prices; r2 found reviews")


def test_model_errors_and_budget_exhaustion_fail_the_crew_with_that_cause() -> None:
    with Simulation(seed=0, faults=Faults(model_errors=1.0)) as sim:
        crew = EXAMPLES["sequential"](sim)
        status, _, failure = sim.run().crews[crew]
        assert status is CrewStatus.FAILED and "SimulatedModelError" in str(failure)
    with Simulation(seed=0, faults=Faults(budget_exhaustion=1.0)) as sim:
        crew = EXAMPLES["sequential"](sim)
        status, _, failure = sim.run().crews[crew]
        assert status is CrewStatus.FAILED and "BudgetExhaustedError" in str(failure)
        assert sim.snapshot(crew).budget.exhausted_reason is not None


def test_a_crew_that_crashes_at_its_snapshot_is_restored_and_its_wait_still_expires_on_time() -> None:
    with Simulation(seed=0, faults=Faults(crashes=1.0)) as sim:
        crew = EXAMPLES["sequential"](sim)
        result = sim.run()
        assert "crashed; restored from its last snapshot" in _faults(sim)
        assert [e.detail.split()[0] for e in sim.trace.events() if e.crew == crew and e.kind == "crew"][:2] == [
            "started",
            "woke",
        ]
        assert result.crews[crew][:2] == (CrewStatus.COMPLETED, "edited(draft: actors are data)")
        assert result.virtual_time == 60.0  # the restored wait kept its deadline


def _crash_times(sim: Simulation, crew: str) -> list[float]:
    return [e.time for e in sim.trace.events() if e.crew == crew and e.kind == "fault" and "crashed" in e.detail]


def test_a_crew_crashes_at_every_snapshot_point_not_only_its_first() -> None:
    """It parks at t=0 and again at t=60: with crashes=1.0 it crashes at both (before:
    only at t=0), and each restored wait keeps its deadline."""
    script = [call("wait_for_event", {"topic": "never", "timeout_ms": 60_000})] * 2 + [respond("done")]
    with Simulation(seed=0, faults=Faults(crashes=1.0)) as sim:
        agents = [Agent("a", ScriptedModel(script))]
        crew = sim.spawn("sleeper", agents=agents, orchestration=Sequential([Task("t", "a")]))
        result = sim.run()
        assert _crash_times(sim, crew) == [0.0, 60.0]
        assert result.crews[crew][:2] == (CrewStatus.COMPLETED, "done")
        assert result.virtual_time == 120.0


def test_a_receive_message_loop_crashes_at_each_park() -> None:
    loop = [call("receive_message", {"timeout_ms": 10_000})] * 3 + [respond("looped")]
    with Simulation(seed=0, faults=Faults(crashes=1.0)) as sim:
        crew = sim.spawn("loop", agents=[Agent("a", ScriptedModel(loop))], orchestration=Sequential([Task("t", "a")]))
        result = sim.run()
        assert _crash_times(sim, crew) == [0.0, 10.0, 20.0]
        assert result.crews[crew][:2] == (CrewStatus.COMPLETED, "looped")


def test_a_faulty_seed_replays_exactly() -> None:
    faults = Faults(delay=0.3, drop_replies=0.5, model_errors=0.05, budget_exhaustion=0.05, crashes=0.5)
    runs = {seed: run_seed(EXAMPLES["hierarchical"], seed, faults=faults) for seed in range(30)}
    assert len({r.outcome for r in runs.values()}) >= 2
    for seed in (0, 7, 29):
        again = run_seed(EXAMPLES["hierarchical"], seed, faults=faults)
        assert (again.outcome, again.trace_json) == (runs[seed].outcome, runs[seed].trace_json)


def test_faults_classes_in_a_sweep() -> None:
    classes = sweep(EXAMPLES["parallel"], range(40), faults=Faults(model_errors=0.2))
    outcomes = {c.outcome: c for c in classes}
    assert "completed: score 7" in outcomes
    assert any(o.startswith("failed: SimulatedModelError") for o in outcomes)
    assert sum(c.count for c in classes) == 40


def test_bad_fault_specifications_are_refused_with_what_to_write(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="probability between 0 and 1"):
        Faults(delay=2.0)
    with pytest.raises(ValueError, match="max_delay must be > 0"):
        Faults(max_delay=0)
    with pytest.raises(ValueError, match="names among delay, max_delay"):
        Faults.parse("delay=0.1,typo=1")
    with pytest.raises(ValueError, match="not a number"):
        Faults.parse("delay=often")
    assert Faults.parse("delay=0.25, crashes=1") == Faults(delay=0.25, crashes=1.0)
    assert main(["simulate", "graph", "--faults", "nope=1"]) == 2
    assert "names among" in capsys.readouterr().out
