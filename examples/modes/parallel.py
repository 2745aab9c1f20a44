"""The parallel orchestration mode, written out: Three scorers in parallel; one waits for a
market event; quorum of two joins.

Branches run at once; the join (all, any, quorum) decides when the crew goes on. The
agents are scripted (a ``ScriptedModel`` answers instead of an LLM) and run in a
:class:`~orkeon_actors.sim.Simulation` on a virtual clock, so the waits inside take no
real time and every run prints the same timeline.

Run: python examples/modes/parallel.py
"""

from __future__ import annotations

from orkeon_actors.crew import Agent, ScriptedModel, call, respond
from orkeon_actors.orchestration import Branch, Parallel
from orkeon_actors.sim import Simulation


def build(sim: Simulation) -> str:
    """Spawn the crew in ``sim``; returns its crew id."""
    fast = Agent("fast", ScriptedModel(["score 7"]))
    slow = Agent(
        "slow",
        ScriptedModel([call("wait_for_event", {"topic": "market.open", "timeout_ms": 30_000}), respond("score 5")]),
    )
    steady = Agent("steady", ScriptedModel(["score 7"]))
    return sim.spawn(
        "scoring",
        agents=[fast, slow, steady],
        orchestration=Parallel(
            [Branch("b1", "fast", "score"), Branch("b2", "slow", "score"), Branch("b3", "steady", "score")],
            join="quorum",
            quorum=2,
            aggregation="majority",
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
