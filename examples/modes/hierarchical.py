"""The hierarchical orchestration mode, written out: A manager splits a goal between two
researchers over the hub, then aggregates.

A manager splits a goal into subtasks for its workers, then aggregates their results.
The agents are scripted (a ``ScriptedModel`` answers instead of an LLM) and run in a
:class:`~orkeon_actors.sim.Simulation` on a virtual clock, so the waits inside take no
real time and every run prints the same timeline.

Run: python examples/modes/hierarchical.py
"""

from __future__ import annotations

import json

from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel, respond
from orkeon_actors.orchestration import Hierarchical
from orkeon_actors.sim import Simulation


def build(sim: Simulation) -> str:
    """Spawn the crew in ``sim``; returns its crew id."""
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
        orchestration=Hierarchical("manager", ["r1", "r2"], "compare laptops"),
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
