"""Simulated model latency: a ScriptedModel with ``latency`` answers that long after it
was asked, in virtual time, so a simulated Parallel crew's calls overlap; byte-identical
per seed."""

from __future__ import annotations

from orkeon_actors.crew import Agent, ScriptedModel
from orkeon_actors.model.agent_events import ModelCallFinished, ModelCallStarted
from orkeon_actors.orchestration import Branch, Parallel, Sequential, Task
from orkeon_actors.sim import Simulation


def _run(seed: int) -> tuple[str, float, list[str]]:
    with Simulation(seed=seed) as sim:
        agents = [Agent(f"a{i}", ScriptedModel([f"answer {i}"], latency=2.0)) for i in range(4)]
        sim.spawn("fan", agents=agents, orchestration=Parallel([Branch(f"b{i}", f"a{i}", "go") for i in range(4)]))
        writer = Agent("w", ScriptedModel(["one", "two"], per_task=False, latency=3.0))
        sim.spawn("chain", agents=[writer], orchestration=Sequential([Task("first", "w")]))
        result = sim.run()
        assert result.all_completed
        order = [
            f"{type(e).__name__} {e.agent_id} {e.started_at.isoformat()}"
            for e in sim.runtime.agent_events.recent()
            if isinstance(e, ModelCallStarted | ModelCallFinished)
        ]
        return sim.trace.to_json(), result.virtual_time, order


def test_a_simulated_parallel_crews_calls_overlap_in_virtual_time() -> None:
    _, virtual_time, order = _run(3)
    assert virtual_time == 3.0  # four calls of 2 s at once, beside one of 3 s: not 2 x 4 + 3
    starts = [line for line in order if line.startswith("ModelCallStarted")]
    assert len(starts) == 5 and all(line.endswith("00:00:00+00:00") for line in starts)  # all asked at t=0


def test_one_seed_gives_a_byte_identical_trace_with_latency() -> None:
    first = _run(11)
    for _ in range(5):
        assert _run(11) == first
