"""Seed sweeps find interleaving bugs, and a failing seed replays exactly."""

from __future__ import annotations

import json

import attrs
import pytest

from orkeon_actors.cli.main import main
from orkeon_actors.crew.crew_actor import CrewActor
from orkeon_actors.model.ids import AgentId
from orkeon_actors.model.message import Message
from orkeon_actors.orchestration import Hierarchical
from orkeon_actors.orchestration.hierarchical import RESULT_KEY
from orkeon_actors.orchestration.state import HierarchicalState
from orkeon_actors.sim import Simulation
from orkeon_actors.sim.examples import EXAMPLES, INVARIANTS, build_hierarchical
from orkeon_actors.sim.sweep import parse_seeds, run_seed, sweep


class RacyHierarchical(Hierarchical):
    """Test-only mode with a planted race: when the *last* worker's partial result reaches
    the manager first, it aggregates at once and forgets the other worker. Correct in
    every run where results arrive in worker order: a fixed schedule never shows it."""

    def on_agent_mail(self, crew: CrewActor, agent_id: AgentId, message: Message) -> bool:
        state = crew.orchestration
        assert isinstance(state, HierarchicalState)
        if agent_id == self.manager and RESULT_KEY in message.metadata:
            received = sum(len(d.partial_results) for d in state.workers.values())
            if received == 0 and message.json()["worker"] == str(self.workers[-1]):
                data = message.json()
                results = [{"worker": data["worker"], "task": data["task"], "output": data["output"]}]
                crew.set_orchestration(attrs.evolve(state), "aggregating early (the planted bug)")
                crew.assign(self.manager, "aggregate", json.dumps({"goal": self.goal, "results": results}))
                return True
        return super().on_agent_mail(crew, agent_id, message)


def _racy(sim: Simulation) -> str:
    return build_hierarchical(sim, RacyHierarchical)


def _every_worker_reported(sim: Simulation, crew: str) -> str | None:
    status, result, failure = sim.result().crews[crew]
    missing = [w for w in ("r1", "r2") if result is None or f"{w} found" not in result]
    return None if not missing else f"the report lacks {missing} ({status.value}: {result or failure})"


CHECKS = {"every-worker-reported": _every_worker_reported}


def test_a_seed_sweep_finds_the_planted_race_and_its_seed_replays_it() -> None:
    classes = sweep(_racy, range(1, 101), CHECKS)
    bad = [c for c in classes if c.violated]
    good = [c for c in classes if not c.violated]
    assert good and good[0].outcome == "completed: report: r1 found prices; r2 found reviews"
    assert len(bad) == 1 and bad[0].outcome.startswith("violated every-worker-reported: the report lacks ['r1']")
    first = run_seed(_racy, bad[0].first_seed, CHECKS)
    for _ in range(3):
        again = run_seed(_racy, bad[0].first_seed, CHECKS)
        assert (again.outcome, again.trace_json) == (first.outcome, first.trace_json)
    assert first.outcome == bad[0].outcome
    assert "aggregating early (the planted bug)" in first.trace_json
    # The correct mode never violates the same invariant, over the same seeds.
    assert not any(c.violated for c in sweep(EXAMPLES["hierarchical"], range(1, 101), CHECKS))


@pytest.mark.parametrize("mode", sorted(EXAMPLES))
def test_every_mode_example_keeps_its_invariants_over_many_seeds(mode: str) -> None:
    classes = sweep(EXAMPLES[mode], range(40), INVARIANTS[mode])
    assert not [c for c in classes if c.violated], classes
    assert [c.outcome.split(":")[0] for c in classes] == ["completed"]


def test_the_cli_sweep_prints_outcome_classes_and_the_first_seed_of_each(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "parallel", "--seeds", "1..30", "--check", "quorum-join", "--faults", "model_errors=0.2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "parallel: 30 seeds (1..30), checked: quorum-join" in out
    assert "completed: score 7" in out and "first seed" in out and "failed: SimulatedModelError" in out
    assert main(["simulate", "graph", "--seeds", "1..5", "--check", "nope"]) == 2
    assert "choose one of: all, cycle-limit" in capsys.readouterr().out
    assert main(["simulate", "all", "--seeds", "1..5"]) == 2
    assert main(["simulate", "graph", "--check", "cycle-limit"]) == 2
    assert "--check needs --seeds" in capsys.readouterr().out


def test_seed_ranges() -> None:
    assert parse_seeds("1..500") == range(1, 501)
    assert parse_seeds("7") == range(7, 8)
    with pytest.raises(ValueError, match=r"FIRST\.\.LAST"):
        parse_seeds("1-5")
    with pytest.raises(ValueError, match="before the first"):
        parse_seeds("5..1")


def test_the_planted_bug_shows_under_orkeon_simulate_seed_n_when_registered(capsys: pytest.CaptureFixture[str]) -> None:
    """A failing seed printed by the CLI's sweep reproduces with ``--seed N``."""
    EXAMPLES["racy"] = _racy
    INVARIANTS["racy"] = CHECKS
    try:
        assert main(["simulate", "racy", "--seeds", "1..100", "--check", "all"]) == 1
        out = capsys.readouterr().out
        line = next(x for x in out.splitlines() if x.startswith("reproduce with: "))
        seed = int(line.rsplit("--seed ", 1)[1])
        assert main(["simulate", "racy", "--seed", str(seed)]) == 0  # it completes, with the wrong report
        replay = capsys.readouterr().out
        assert "aggregating early (the planted bug)" in replay and "report: r2 found reviews" in replay
    finally:
        del EXAMPLES["racy"], INVARIANTS["racy"]
