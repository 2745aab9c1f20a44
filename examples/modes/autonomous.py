"""The autonomous orchestration mode, written out: A root agent delegates to a planner,
which delegates to a coder (depth 2).

A root agent delegates to agents it creates by role, down to a maximum depth. The agents
are scripted (a ``ScriptedModel`` answers instead of an LLM) and run in a
:class:`~orkeon_actors.sim.Simulation` on a virtual clock, so the waits inside take no
real time and every run prints the same timeline.

Run: python examples/modes/autonomous.py
"""

from __future__ import annotations

from orkeon_actors.crew import Agent, BudgetLimits, ScriptedModel, call, respond
from orkeon_actors.orchestration import Autonomous
from orkeon_actors.sim import Simulation


def build(sim: Simulation) -> str:
    """Spawn the crew in ``sim``; returns its crew id."""

    def factory(role: str, depth: int) -> ScriptedModel:
        if role == "planner":
            return ScriptedModel(
                [call("delegate", {"role": "coder", "task": "write it"}), respond("plan done")], per_task=True
            )
        return ScriptedModel(["code written"])

    root = Agent(
        "root",
        ScriptedModel([call("delegate", {"role": "planner", "task": "plan the feature"}), respond("feature shipped")]),
        budget=BudgetLimits(max_tool_calls=10),
    )
    return sim.spawn(
        "startup",
        agents=[root],
        orchestration=Autonomous("root", "build the feature", model_factory=factory, max_depth=2),
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
