"""A lifecycle supervisor run as a child process by ``test_crash_boot.py`` and killed.

Usage::

    python tests/lifecycle/life_child.py DB PHASE --at SECONDS [--kill WHERE]

The clock is a ``VirtualClock`` at 2026-01-01 + ``SECONDS``, so a later process sees
time has passed. Crews: ``finite`` waits 60 s on topic ``x``; ``forever`` waits forever
on topic ``y``; ``mail`` waits forever on its mailbox. Phases:

* ``sleep``: spawn the three crews, put them to sleep, print ``ASLEEP``, die (SIGKILL);
* ``boot``: boot a supervisor, let the boot settle, print ``STATE <json>``, die;
* ``post``: boot, post ``{"n": 1}`` to ``agent://mail/a`` (the post is durable once
  ``post`` returns: ``POSTED``), then run like ``run``;
* ``publish``: boot, publish ``{"n": 1}`` on topic ``y``, which wakes ``forever`` (kept
  durably for the sleeping crew once ``publish`` returns: ``PUBLISHED``), then run
  like ``run``;
* ``run``: boot, wait for the ``--expect`` crews to complete, print ``RESULT <json>``.

``--kill factory`` SIGKILLs the process when a crew is rebuilt at wake (activation,
before the restore); ``--kill model`` when the woken agent's model gets its trigger
(delivered, effects not yet durable).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

WAITS: dict[str, tuple[str, dict[str, Any]]] = {
    "finite": ("wait_for_event", {"topic": "x", "timeout_ms": 60_000}),
    "forever": ("wait_for_event", {"topic": "y", "wait_forever": True}),
    "mail": ("receive_message", {"wait_forever": True}),
}


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("phase", choices=("sleep", "boot", "post", "publish", "run"))
    parser.add_argument("--at", type=float, default=0.0)
    parser.add_argument("--kill", choices=("factory", "model"))
    parser.add_argument("--expect", default="", help="comma-separated crews to run to completion")
    args = parser.parse_args()
    waking = args.phase != "sleep"
    # Set once ``publish`` returned: a kill in the factory waits for it (the wake may
    # start before the publisher's call returns; what is promised is what it returned).
    published = threading.Event()

    def factory(crew_id: ok.CrewId) -> CrewBlueprint:
        if waking and args.kill == "factory":
            if args.phase == "publish":
                published.wait(10)
            emit(f"ACTIVATING {crew_id}")
            die()
        tool, arguments = WAITS[str(crew_id)]

        def policy(request: ModelRequest) -> ModelResponse:
            results = [m.content for m in request.messages if m.role == "tool"]
            if not results:
                return call(tool, arguments)
            if args.kill == "model":
                emit(f"DELIVERED {crew_id}")
                die()
            return respond(json.dumps(results))

        agent = Agent("a", ScriptedModel(policy=policy))
        return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))

    clock = ok.VirtualClock(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=args.at))
    rt = ok.Runtime.start(store=args.db, clock=clock)
    sup = CrewSupervisor(rt, factories=dict.fromkeys(WAITS, factory))

    def status(crew: str) -> CrewStatus | None:
        return sup.status(crew)

    if args.phase == "sleep":
        for crew in WAITS:
            sup.spawn(crew, crew)
        for crew in WAITS:
            wait_until(lambda c=crew: status(c) is CrewStatus.WAITING, what=f"{crew} waiting")  # type: ignore[misc]
            assert sup.sleep(crew) is True
        emit("ASLEEP")
        die()
    emit(f"BOOTED {sup.booted_asleep}")
    if args.phase == "boot":
        states = {crew: sup.state(crew).value for crew in WAITS}
        emit("STATE " + json.dumps({"states": states, "wakes": sup.stats.wakes}))
        die()
    if args.phase == "post":
        rt.hub.bind("shop", "desk").post("agent://mail/a", {"n": 1})
        emit("POSTED")
    if args.phase == "publish":
        rt.hub.bind("shop", "desk").publish("y", {"n": 1})
        emit("PUBLISHED")
        published.set()
    expected = [c for c in args.expect.split(",") if c]
    for crew in expected:
        wait_until(lambda c=crew: sup.outcome(c) is not None, what=f"{crew} done", timeout=30)  # type: ignore[misc]
    results = {}
    for crew in expected:
        outcome = sup.outcome(crew)
        assert outcome is not None
        st, result, failure = outcome.status, outcome.result, outcome.failure
        results[crew] = {"status": st.value, "result": result, "failure": None if failure is None else str(failure)}
    out = {
        "results": results,
        "states": {crew: sup.state(crew).value for crew in WAITS if crew not in expected},
        "kept": rt.hub.readers.query("SELECT count(*) FROM mailboxes")[0][0],
        "expiries": sup.stats.expiries,
    }
    emit("RESULT " + json.dumps(out))
    sup.stop()
    rt.stop()


if __name__ == "__main__":
    main()
