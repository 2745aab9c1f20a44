"""A crew agent's ``wait_for_event`` cursors sleep with the crew (spec §5.2, §8.1):
events a cursor held when the crew went to sleep are read after it wakes, in order,
once; the parked wait still wakes it on its topic."""

from __future__ import annotations

import json
from typing import Any

from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

from .conftest import Env


def _reads(request: ModelRequest) -> list[dict[str, Any]]:
    return [json.loads(m.content) for m in request.messages if m.role == "tool" and m.name == "wait_for_event"]


def _blueprint(_crew: Any) -> CrewBlueprint:
    """Opens an ``orders`` cursor, parks on ``go``, then reads ``orders`` three times."""

    def policy(request: ModelRequest) -> ModelResponse:
        reads = _reads(request)
        if not reads:
            return call("wait_for_event", {"topic": "orders", "timeout_ms": 1_000})
        if len(reads) == 1:
            return call("wait_for_event", {"topic": "go", "wait_forever": True})
        if len(reads) < 5:
            return call("wait_for_event", {"topic": "orders", "timeout_ms": 1_000})
        return respond(json.dumps([r.get("message", {}).get("payload") for r in reads[2:]]))

    agent = Agent("a", ScriptedModel(policy=policy))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))


def _parked_on(env: Env, crew: str, topic: str) -> bool:
    snapshot = env.snapshot(crew)
    return [w.kind.topic for w in snapshot.pending_waits] == [topic] and snapshot.status == "waiting_for_message"


def test_events_a_cursor_held_at_sleep_are_read_after_the_wake(env: Env) -> None:
    env.factories["reader"] = _blueprint
    sup = env.boot()
    sup.spawn("reader", "r1")
    wait_until(lambda: _parked_on(env, "r1", "orders"), what="first orders wait parked")
    env.clock.advance(1)  # the first read times out: the cursor stays open
    wait_until(lambda: _parked_on(env, "r1", "go"), what="parked on go")
    shop = env.hub.bind("shop")
    shop.publish("orders", {"n": 0})
    shop.publish("orders", {"n": 1})
    wait_until(
        lambda: [len(c.buffered) for c in env.snapshot("r1").agents[0].cursors] == [2, 0],
        what="both orders held by the cursor",
    )
    assert sup.sleep("r1") is True
    assert sup.state("r1") is LifecycleState.ASLEEP
    shop.publish("go", {})  # wakes it: the cursor comes back with what it held
    wait_until(lambda: sup.ref("r1") is not None and _parked_on(env, "r1", "orders"), what="third read parked")
    env.clock.advance(1)
    assert env.settle("r1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    _, result, _ = env.summary("r1")
    assert json.loads(result) == [{"n": 0}, {"n": 1}, None]
