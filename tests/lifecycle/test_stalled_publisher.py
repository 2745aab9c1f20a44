"""A publisher that stalls between routing a topic event and keeping it (spec §5.2, §7,
§11): while it stalls, the crew is woken, handed the event (it was in mid-routing),
reads it and many more, and sleeps on a snapshot that reflects it. The keeping write
that follows must not keep the event for the sleeping crew again: its next wake would
hand it over a second time (the cursor remembers only its last handed-out ids)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.model.message import Message
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until
from orkeon_actors.tools.cursors import RECENT_IDS

from .conftest import Env


def _reader(_crew: Any) -> CrewBlueprint:
    def policy(request: ModelRequest) -> ModelResponse:
        reads = [json.loads(m.content) for m in request.messages if m.role == "tool"]
        payloads = [r["message"]["payload"] for r in reads if r.get("message")]
        if payloads and payloads[-1] == "done":
            return respond(json.dumps(payloads[:-1]))
        return call("wait_for_event", {"topic": "orders", "wait_forever": True})

    agent = Agent("a", ScriptedModel(policy=policy), max_turns=10_000)
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))


def test_an_event_reflected_while_its_publisher_stalled_is_not_kept_again(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    stalled, resume = threading.Event(), threading.Event()
    original = CrewSupervisor.on_dispatch

    def on_dispatch(sup: CrewSupervisor, message: Message) -> None:
        if message.payload == b'"stalled"':  # routed already: stall before keeping it
            stalled.set()
            assert resume.wait(30)
        original(sup, message)

    monkeypatch.setattr(CrewSupervisor, "on_dispatch", on_dispatch)
    env.factories["reader"] = _reader
    sup = env.boot()
    sup.spawn("reader", "r1")
    env.settle("r1", CrewStatus.WAITING)
    assert sup.sleep("r1") is True  # asleep: its snapshot holds the orders cursor
    shop = env.hub.bind("shop")
    publisher = threading.Thread(target=lambda: env.hub.bind("shop").publish("orders", "stalled"))
    publisher.start()
    assert stalled.wait(30)
    shop.publish("orders", 0)  # wakes it: the stalled event, in mid-routing, is handed over too
    more = RECENT_IDS + 8  # beyond what the cursor remembers having handed out
    wait_until(lambda: env.status("r1") is CrewStatus.WAITING and sup.durable("r1"), what="r1 awake")
    for n in range(1, more):
        shop.publish("orders", n)

    def read_all() -> bool:
        ref = sup.ref("r1")
        if ref is None:
            return False
        snapshot = env.snapshot("r1")
        return len([m for m in snapshot.agents[0].conversation if m.role == "tool"]) == more + 1

    wait_until(read_all, what="every order read")
    env.settle("r1", CrewStatus.WAITING)
    assert sup.sleep("r1") is True  # its snapshot reflects the stalled event
    resume.set()
    publisher.join(30)
    shop.publish("orders", "done")  # wakes it once more
    status, result, _ = env.summary("r1")
    assert status is CrewStatus.COMPLETED
    read = json.loads(result)
    assert read.count("stalled") == 1, read
    assert sorted(n for n in read if n != "stalled") == list(range(more))
