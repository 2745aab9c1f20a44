"""The deterministic scheduler: one seed, one schedule, byte for byte; other seeds, other
interleavings; no thread but the caller's."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.orchestration import Branch, Parallel, Sequential, Task
from orkeon_actors.sim import Faults, Simulation
from orkeon_actors.sim.examples import EXAMPLES
from orkeon_actors.sim.sweep import run_seed
from orkeon_actors.sim.trace import events_from_json

ALL_FAULTS = Faults(delay=0.3, drop_replies=0.3, model_errors=0.02, budget_exhaustion=0.02, crashes=0.3)


def _six_modes(seed: int, faults: Faults | None = None) -> str:
    with Simulation(seed=seed, faults=faults) as sim:
        for build in EXAMPLES.values():
            build(sim)
        sim.run()
        return sim.trace.to_json()


def test_one_seed_gives_a_byte_identical_trace_across_20_runs() -> None:
    first = _six_modes(42)
    assert len(first) > 10_000
    for _ in range(19):
        assert _six_modes(42) == first


def test_one_seed_with_faults_gives_a_byte_identical_trace_across_20_runs() -> None:
    first = _six_modes(9, ALL_FAULTS)
    assert '"kind": "fault"' in first
    for _ in range(19):
        assert _six_modes(9, ALL_FAULTS) == first


def test_one_seed_gives_the_same_trace_in_other_processes_whatever_their_hash_seed() -> None:
    here = _six_modes(42)
    program = (
        "from orkeon_actors.sim import Simulation\n"
        "from orkeon_actors.sim.examples import EXAMPLES\n"
        "import sys\n"
        "with Simulation(seed=42) as sim:\n"
        "    [build(sim) for build in EXAMPLES.values()]\n"
        "    sim.run()\n"
        "    sys.stdout.write(sim.trace.to_json())\n"
    )
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout == here


def test_the_cli_json_is_the_same_trace_in_another_process() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "orkeon_actors.cli", "simulate", "all", "--seed", "42", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == _six_modes(42)


def test_a_mode_with_concurrent_branches_shows_several_interleavings_among_100_seeds() -> None:
    """The hierarchical example's two workers get their sub-tasks from two mailboxes at
    one virtual instant: the seed decides which mailbox turn, hence which worker, runs
    first; the result is the same either way."""
    runs = [run_seed(EXAMPLES["hierarchical"], seed) for seed in range(100)]
    orders = {
        tuple(e.detail for e in events_from_json(r.trace_json) if e.kind == "transition" and " takes " in e.detail)
        for r in runs
    }
    assert len({r.trace_json for r in runs}) >= 2
    assert len(orders) >= 2  # r1 first in some runs, r2 first in others
    assert {r.outcome for r in runs} == {"completed: report: r1 found prices; r2 found reviews"}


def test_every_turn_and_timer_runs_on_the_callers_thread_and_no_thread_is_started() -> None:
    seen: set[threading.Thread] = set()

    def policy(request: ModelRequest) -> ModelResponse:
        seen.add(threading.current_thread())
        if request.turn == 0:
            return call("wait_for_event", {"topic": "never", "timeout_ms": 5_000})
        return respond("timed out, done")

    before = set(threading.enumerate())
    with Simulation(seed=1) as sim:
        for i in range(3):
            agent = Agent("a", ScriptedModel(policy=policy))
            sim.spawn(f"c{i}", agents=[agent], orchestration=Sequential([Task("t", "a")]))
        for build in EXAMPLES.values():
            build(sim)
        during = set(threading.enumerate())
        result = sim.run()
        during |= set(threading.enumerate())
    assert result.all_completed, result
    assert result.virtual_time == 60.0  # the sequential example's one-minute wait expired
    assert seen == {threading.current_thread()}
    assert during - before == set()


def _race(sim: Simulation) -> str:
    """A parallel crew (join ``any``) whose two branches each wait for a message that
    its own feeder crew posts at the same virtual instant: which branch wins is the
    order in which the two deliveries are handled."""
    racers = sim.spawn(
        "race",
        agents=[
            Agent(name, ScriptedModel([call("receive_message", {"timeout_ms": 5_000}), respond(f"{name} won")]))
            for name in ("left", "right")
        ],
        orchestration=Parallel([Branch("l", "left", "wait"), Branch("r", "right", "wait")], join="any"),
    )
    for name in ("left", "right"):
        feeder = Agent(
            "f",
            ScriptedModel(
                [
                    call("wait_for_event", {"topic": "never", "timeout_ms": 1_000}),
                    call("post_message", {"target_mailbox": f"agent://{racers}/{name}", "payload": "go"}),
                    respond("sent"),
                ]
            ),
        )
        sim.spawn(f"feed-{name}", agents=[feeder], orchestration=Sequential([Task("feed", "f")]))
    return racers


def test_the_seed_decides_which_parallel_branch_wins_a_race_at_one_instant() -> None:
    winners = {seed: run_seed(_race, seed).outcome for seed in range(100)}
    assert set(winners.values()) == {"completed: left won", "completed: right won"}
    for seed in (0, 1, 2):
        assert run_seed(_race, seed).outcome == winners[seed]
