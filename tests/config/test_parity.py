"""Paradigm parity (spec §16.4): the same crew as YAML, with the Python builder and (in
test_typescript.py) in TypeScript is the same blueprint, the same runtime crew and the
same outcome. Every YAML example crew also matches the simulation example it mirrors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.config import crew_actor_options
from orkeon_actors.sim.examples import run_example
from orkeon_actors.sim.simulation import Simulation
from tests.config.crews import BUILDERS

ROOT = Path(__file__).resolve().parents[2]
MODES = sorted(BUILDERS)


def yaml_crew(mode: str) -> ok.CrewBlueprint:
    return ok.load_crew(ROOT / "examples" / "crews" / f"{mode}.yaml")


def run(bp: ok.CrewBlueprint) -> tuple[Any, list[Any]]:
    """Run ``bp`` in a simulation: its outcome and its whole trace."""
    with Simulation(seed=3) as sim:
        crew = sim.spawn(bp, crew_id=f"{bp.name}-1")
        result = sim.run(until=3600)
        return result.crews[crew], [(e.time, e.agent, e.kind, e.detail) for e in sim.trace.events()]


def runtime_crew(bp: ok.CrewBlueprint) -> dict[str, Any]:
    """What CrewActor.start receives, models left out (they compare by identity)."""
    options = crew_actor_options(bp, ok.CrewId(f"{bp.name}-1"))
    agents = [(a.agent_id, a.role, a.instructions, a.budget, a.max_turns, a.tools) for a in options.pop("agents")]
    orchestration = options.pop("orchestration")
    config = {k: v for k, v in vars(orchestration).items() if k != "model_factory"}
    return {**options, "agents": agents, "mode": orchestration.mode, "orchestration": repr(sorted(config.items()))}


@pytest.mark.parametrize("mode", MODES)
def test_yaml_and_builder_give_equal_blueprints(mode: str) -> None:
    assert BUILDERS[mode]() == yaml_crew(mode)


@pytest.mark.parametrize("mode", MODES)
def test_yaml_and_builder_give_the_same_runtime_crew_and_outcome(mode: str) -> None:
    from_yaml, from_builder = yaml_crew(mode), BUILDERS[mode]()
    assert runtime_crew(from_yaml) == runtime_crew(from_builder)
    assert run(from_yaml) == run(from_builder)


@pytest.mark.parametrize("mode", MODES)
def test_every_yaml_example_matches_its_simulation_example(mode: str) -> None:
    (status, result, failure), _ = run(yaml_crew(mode))
    sim, crew = run_example(mode)
    try:
        assert sim.result().crews[crew] == (status, result, failure)
        assert status is ok.crew.CrewStatus.COMPLETED
    finally:
        sim.stop()


@pytest.mark.parametrize("mode", MODES)
def test_to_yaml_round_trips(mode: str) -> None:
    bp = yaml_crew(mode)
    text = bp.to_yaml()
    assert ok.CrewBlueprint.from_yaml(text) == bp
    assert ok.CrewBlueprint.from_yaml(text).to_yaml() == text
    assert ok.CrewBlueprint.from_document(bp.to_document()) == bp
