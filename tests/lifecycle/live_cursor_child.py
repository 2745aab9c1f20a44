"""A supervisor whose crew reads a topic through a durable cursor while it is live, run
as a child process by ``test_crash_live_cursor.py`` and killed (SIGKILL).

Usage::

    python tests/lifecycle/live_cursor_child.py DB PHASE [ARGS]

The crew ``r1`` has one agent looping on ``wait_for_event("orders", forever)``; it
answers every payload it read once it reads ``"done"``. Phases (each prints
``PUBLISHED n`` once ``publish`` of order ``n`` returned):

* ``setup``: spawn it, let it park on ``orders``, put it to sleep (its snapshot holds
  the cursor), stop cleanly;
* ``publish FROM TO WHEN``: boot, publish orders ``FROM .. TO-1`` (the first wakes the
  crew, the others reach its live cursor), then die at ``WHEN``: ``returned`` (right
  after the last ``publish`` returned), ``read`` (once the agent read them all: its
  effects are not durable, no snapshot since) or ``slept`` (after a sleep that reflects
  them and one more order, ``TO``, that wakes it again);
* ``random SEED FROM``: boot, publish orders from ``FROM`` on a thread while the main
  thread puts the crew to sleep now and then, and die at a random moment;
* ``fresh FROM TO WHEN [fail-first-checkpoint]``: boot, spawn ``r1`` (it never slept:
  no snapshot), publish orders ``FROM .. TO-1`` as soon as it parks on ``orders``, die
  at ``WHEN`` (``returned`` or ``read``); ``fail-first-checkpoint`` makes the first
  snapshot transaction (the checkpoint of its new cursor) fail with ``OSError``;
* ``switch FROM TO WHEN``: boot, publish ``"switch"`` on ``orders`` (wakes it; its agent
  then reads ``returns``, a cursor its snapshot does not hold), publish returns
  ``FROM .. TO-1`` as soon as it parks there, die at ``WHEN``;
* ``finish [TOPIC]``: boot, publish ``"done"`` on ``TOPIC`` (``orders``), print
  ``RESULT <json>`` (what the crew read, in order, and the kept rows left) and stop
  cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
from typing import Any

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, query_crew, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.store import faults
from orkeon_actors.testing import wait_until

_out = threading.Lock()


def emit(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def payloads(request: ModelRequest) -> list[Any]:
    reads = [json.loads(m.content) for m in request.messages if m.role == "tool"]
    return [r["message"]["payload"] for r in reads if r.get("message")]


def reader(_crew: Any) -> CrewBlueprint:
    def policy(request: ModelRequest) -> ModelResponse:
        read = payloads(request)
        if read and read[-1] == "done":
            return respond(json.dumps(read[:-1]))
        topic = "returns" if "switch" in read else "orders"
        return call("wait_for_event", {"topic": topic, "wait_forever": True})

    agent = Agent("a", ScriptedModel(policy=policy), max_turns=1_000_000)
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("phase", choices=("setup", "publish", "random", "fresh", "switch", "finish"))
    parser.add_argument("args", nargs="*")
    args = parser.parse_args()
    rt = ok.Runtime.start(store=args.db)
    sup = CrewSupervisor(rt, factories={"reader": reader})
    shop = rt.hub.bind("shop")

    def read_count() -> int:
        ref = sup.ref("r1")
        if ref is None:
            return -1
        snapshot = query_crew(ref, "snapshot")
        return len([m for m in snapshot.agents[0].conversation if m.role == "tool"])

    def publish(n: int, topic: str = "orders") -> None:
        shop.publish(topic, n)
        emit(f"PUBLISHED {n}")

    def parked(reads: int) -> bool:
        return read_count() >= reads and sup.status("r1") is CrewStatus.WAITING

    if args.phase == "setup":
        sup.spawn("reader", "r1")
        wait_until(lambda: sup.status("r1") is CrewStatus.WAITING, what="parked on orders")
        assert sup.sleep("r1") is True
        sup.stop()
        rt.stop()
        emit("READY")
        return
    if args.phase == "publish":
        start, stop, when = int(args.args[0]), int(args.args[1]), args.args[2]
        base = max(0, read_count())
        for n in range(start, stop):
            publish(n)
        if when == "read":
            wait_until(lambda: read_count() >= base + stop - start, what="every order read")
        if when == "slept":
            wait_until(lambda: read_count() >= base + stop - start, what="every order read")
            wait_until(lambda: sup.status("r1") is CrewStatus.WAITING, what="waiting again")
            assert sup.sleep("r1") is True
            publish(stop)  # wakes it; read live, not reflected yet
        die()
    if args.phase == "random":
        rng = random.Random(int(args.args[0]))
        start = int(args.args[1])

        def publisher() -> None:
            n = start
            while True:
                publish(n)
                n += 1
                time.sleep(rng.random() * 0.004)

        threading.Thread(target=publisher, daemon=True).start()
        deadline = time.monotonic() + rng.uniform(0.05, 0.6)
        while time.monotonic() < deadline:
            if rng.random() < 0.3:
                sup.sleep("r1", timeout=5)
            time.sleep(rng.random() * 0.05)
        die()
    if args.phase in ("fresh", "switch"):
        start, stop, when = int(args.args[0]), int(args.args[1]), args.args[2]
        topic = "orders"
        if args.phase == "fresh":
            if args.args[3:] == ["fail-first-checkpoint"]:
                failures = ["lifecycle.save"]  # the first snapshot transaction (its checkpoint) fails

                def fail_once(point: str) -> None:
                    if failures and point == failures[0]:
                        failures.clear()
                        raise OSError("disk full (injected)")

                faults.install(fail_once)
            sup.spawn("reader", "r1")
            wait_until(lambda: parked(0), what="parked on orders")
        else:
            shop.publish("orders", "switch")
            wait_until(lambda: parked(1), what="parked on returns")
            topic = "returns"
        base = read_count()
        for n in range(start, stop):  # the agent parked on the cursor: each kept once publish returns
            publish(n, topic)
        if when == "read":
            wait_until(lambda: read_count() >= base + stop - start, what="every event read")
        die()
    shop.publish(args.args[0] if args.args else "orders", "done")
    wait_until(lambda: sup.outcome("r1") is not None, what="r1's outcome", timeout=30)
    outcome = sup.outcome("r1")
    assert outcome is not None and outcome.result is not None, outcome
    kept = int(rt.hub.readers.query("SELECT count(*) FROM cursor_events")[0][0])
    sup.stop()
    rt.stop()
    emit("RESULT " + json.dumps({"read": json.loads(outcome.result), "kept": kept}))


if __name__ == "__main__":
    main()
