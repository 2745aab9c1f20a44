"""A supervisor whose crew keeps events for a sleeping cursor, run as a child process by
``test_crash_cursor.py`` and killed (SIGKILL).

Usage::

    python tests/lifecycle/cursor_child.py DB PHASE

The crew ``r1`` opens an ``orders`` cursor (its first read times out), parks on ``go``,
then reads ``orders`` until ``done`` and answers what it read. Phases:

* ``sleep``: spawn it, put it to sleep parked on ``go``, publish ``orders`` 0, 1, 2
  (kept in the store for its sleeping cursor), print ``KEPT 3``, die;
* ``woken``: boot, publish ``go``: the crew wakes, is handed the kept events and reads
  all three (its effects are not durable: no snapshot since), print ``READ <kept rows>``,
  die;
* ``finish``: boot, publish ``go``, wait for three reads, publish ``done``, print
  ``RESULT <json>`` (the answer and the kept rows left) and stop cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from datetime import UTC, datetime
from typing import Any

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, query_crew, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def reader(_crew: Any) -> CrewBlueprint:
    def policy(request: ModelRequest) -> ModelResponse:
        reads = [json.loads(m.content) for m in request.messages if m.role == "tool"]
        if not reads:
            return call("wait_for_event", {"topic": "orders", "timeout_ms": 1_000})
        if len(reads) == 1:
            return call("wait_for_event", {"topic": "go", "wait_forever": True})
        payloads = [r.get("message", {}).get("payload") for r in reads[2:]]
        if payloads and payloads[-1] == "done":
            return respond(json.dumps(payloads[:-1]))
        return call("wait_for_event", {"topic": "orders", "wait_forever": True})

    agent = Agent("a", ScriptedModel(policy=policy))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("phase", choices=("sleep", "woken", "finish"))
    args = parser.parse_args()
    clock = ok.VirtualClock(datetime(2026, 1, 1, tzinfo=UTC))
    rt = ok.Runtime.start(store=args.db, clock=clock)
    sup = CrewSupervisor(rt, factories={"reader": reader})
    shop = rt.hub.bind("shop")

    def kept() -> int:
        return int(rt.hub.readers.query("SELECT count(*) FROM cursor_events")[0][0])

    def tool_results() -> int:
        ref = sup.ref("r1")
        if ref is None:
            return -1
        snapshot = query_crew(ref, "snapshot")
        if snapshot.status != "waiting_for_message":
            return -1
        return len([m for m in snapshot.agents[0].conversation if m.role == "tool"])

    if args.phase == "sleep":
        sup.spawn("reader", "r1")
        wait_until(lambda: tool_results() == 0, what="first orders wait parked")
        clock.advance(1)
        wait_until(lambda: tool_results() == 1, what="parked on go")
        assert sup.sleep("r1") is True
        for n in range(3):
            shop.publish("orders", n)
        wait_until(lambda: kept() == 3, what="three orders kept")
        emit("KEPT 3")
        die()
    shop.publish("go", {})
    wait_until(lambda: tool_results() == 5, what="the three kept orders read")
    if args.phase == "woken":
        emit(f"READ {kept()}")
        die()
    shop.publish("orders", "done")
    wait_until(lambda: sup.status("r1") is CrewStatus.COMPLETED, what="r1 completed")
    wait_until(lambda: sup.outcome("r1") is not None, what="r1's outcome")
    outcome = sup.outcome("r1")
    assert outcome is not None and outcome.result is not None
    result = outcome.result
    wait_until(lambda: kept() == 0, what="kept rows deleted with the finished crew")
    sup.stop()
    emit("RESULT " + json.dumps({"read": json.loads(result), "kept": kept()}))
    rt.stop()


if __name__ == "__main__":
    main()
