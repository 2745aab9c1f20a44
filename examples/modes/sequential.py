"""The sequential orchestration mode, written out: A writer drafts, waits (a minute,
virtual) for a review request, an editor edits.

Tasks run one after another; each agent gets the previous outputs in its task. The
agents are scripted (a ``ScriptedModel`` answers instead of an LLM) and run in a
:class:`~orkeon_actors.sim.Simulation` on a virtual clock, so the waits inside take no
real time and every run prints the same timeline.

Run: python examples/modes/sequential.py
"""

from __future__ import annotations

import json

from orkeon_actors.crew import Agent, ScriptedModel, call, respond
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.sim import Simulation


def build(sim: Simulation) -> str:
    """Spawn the crew in ``sim``; returns its crew id."""
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
