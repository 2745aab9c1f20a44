"""A crew that sleeps and wakes across a restart.

A crew whose agent waits for mail is put to sleep: its snapshot and pending wait go to
the store and it holds no actor and no thread. The runtime stops. A new runtime (think:
the next day, another process) boots lazily, reading only the wait index; a post to the
sleeping agent's mailbox wakes the crew, which resumes mid-wait with the message as its
tool result and finishes.

Run: python examples/sleep_wake.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import orkeon_actors as ok
from orkeon_actors.crew import Agent, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until


def orders(crew_id: ok.CrewId) -> CrewBlueprint:
    """How to build the crew, at spawn and at every wake: code is rebuilt, data restored.
    The scripted model waits for one message, then answers."""
    intake = Agent("intake", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("order booked")]))
    return CrewBlueprint(agents=[intake], orchestration=Sequential([Task("take the next order", "intake")]))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "state.db"

        # Day 1: spawn the crew; once its agent waits for mail, put it to sleep.
        with ok.Runtime.start(store=db) as rt:
            sup = CrewSupervisor(rt, factories={"orders": orders})
            sup.spawn("orders", "orders-1")
            wait_until(lambda: sup.sleep("orders-1"), what="orders-1 asleep")  # False while it still works
            print("day 1:", sup.state("orders-1").value, "| pending waits:", len(rt.hub.load_pending_waits("orders-1")))
            sup.stop()

        # Day 2: a new runtime; the crew is still asleep until something it waits for arrives.
        with ok.Runtime.start(store=db) as rt:
            sup = CrewSupervisor(rt, factories={"orders": orders})
            assert sup.state("orders-1") is LifecycleState.ASLEEP
            print("day 2 boot:", sup.booted_asleep, "crew(s) asleep")
            rt.hub.bind("shop", "web").post("agent://orders-1/intake", {"order": 42})  # wakes it
            outcome = sup.wait_finished("orders-1", timeout=30)
            print("day 2:", outcome.status.value, "->", outcome.result)
            sup.stop()

        # Day 3: the outcome outlived the restart (kept for PurgePolicy.outcome_retention).
        with ok.Runtime.start(store=db) as rt:
            sup = CrewSupervisor(rt, factories={"orders": orders})
            kept = sup.outcome("orders-1")
            print("day 3:", sup.state("orders-1").value, "->", kept.result if kept else None)
            sup.stop()


if __name__ == "__main__":
    main()
