"""A runtime in another process: one crew asleep on a mailbox, one live crew parked on a
finite topic wait. Prints ``ready`` and runs until its standard input closes."""

from __future__ import annotations

import sys

import orkeon_actors as ok
from orkeon_actors.crew import Agent, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task


def sleeper(_: ok.CrewId) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("done")]))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


def main() -> None:
    with ok.Runtime.start(store=sys.argv[1]) as rt:
        sup = CrewSupervisor.start(rt, factories={"sleeper": sleeper})
        sup.spawn("sleeper", "napper")
        sup.sleep("napper")
        print("ready", flush=True)
        sys.stdin.read()
        sup.stop()


if __name__ == "__main__":
    main()
