"""The consensual orchestration mode, written out: Three voters, supermajority; round 1
fails, the proposer revises, round 2 passes.

Voters decide by a rule (majority, supermajority, unanimity); a proposer revises between
rounds. The agents are scripted (a ``ScriptedModel`` answers instead of an LLM) and run
in a :class:`~orkeon_actors.sim.Simulation` on a virtual clock, so the waits inside take
no real time and every run prints the same timeline.

Run: python examples/modes/consensual.py
"""

from __future__ import annotations

import json

from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel, respond
from orkeon_actors.orchestration import Consensual
from orkeon_actors.sim import Simulation


def build(sim: Simulation) -> str:
    """Spawn the crew in ``sim``; returns its crew id."""

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


def main() -> int:
    """Run the crew to completion and print its timeline; 0 when it completed."""
    with Simulation(seed=0) as sim:
        crew = build(sim)
        result = sim.run(until=3600)  # virtual seconds
        print(sim.trace.timeline())
        status, output, failure = result.crews[crew]
        print(f"-> {status.value}: {output if failure is None else failure}")
        return 0 if failure is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
