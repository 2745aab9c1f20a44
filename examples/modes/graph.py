"""The graph orchestration mode, written out: draft -> review -> (draft again while quality
< 3) -> publish -> END.

Nodes are agents, edges carry conditions on the shared state; cycles are bounded. The
agents are scripted (a ``ScriptedModel`` answers instead of an LLM) and run in a
:class:`~orkeon_actors.sim.Simulation` on a virtual clock, so the waits inside take no
real time and every run prints the same timeline.

Run: python examples/modes/graph.py
"""

from __future__ import annotations

import json

from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel, respond
from orkeon_actors.orchestration import END, Condition, Edge, Graph
from orkeon_actors.sim import Simulation


def build(sim: Simulation) -> str:
    """Spawn the crew in ``sim``; returns its crew id."""

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
            max_cycles=5,
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
