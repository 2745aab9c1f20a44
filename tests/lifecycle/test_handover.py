"""Topic messages are not lost while a crew's cursors are closed (spec §5.2, §7.3):
published while the crew is being activated (between the wake decision and its
restored cursors reopening), or while it is being snapshotted, they are kept and
handed over to the cursors that match them, in publish order, once each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors import CrewId
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.crew.handover import Handover
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.store import faults
from orkeon_actors.testing import wait_until

from .conftest import Env


def _reads(request: ModelRequest) -> list[dict[str, Any]]:
    return [json.loads(m.content) for m in request.messages if m.role == "tool" and m.name == "wait_for_event"]


def _loop(rounds: int) -> CrewBlueprint:
    """The §5.2 loop: ``wait_for_event("orders.*")`` until ``rounds`` events were read."""

    def policy(request: ModelRequest) -> ModelResponse:
        reads = _reads(request)
        if len(reads) >= rounds:
            return respond(json.dumps([r["message"]["payload"] for r in reads]))
        return call("wait_for_event", {"topic": "orders.*", "wait_forever": True})

    agent = Agent("a", ScriptedModel(policy=policy), max_turns=rounds + 1)
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("loop", agent.agent_id)]))


def _parked(env: Env, crew: str, reads: int) -> bool:
    snapshot = env.snapshot(crew)
    return (
        snapshot.status == "waiting_for_message"
        and len([m for m in snapshot.agents[0].conversation if m.role == "tool"]) == reads
    )


def _result(env: Env, crew: str) -> Any:
    assert env.settle(crew, CrewStatus.COMPLETED, CrewStatus.FAILED) is CrewStatus.COMPLETED
    _, result, _ = env.summary(crew)
    return json.loads(result)


@pytest.mark.parametrize("restart", [False, True], ids=["same-run", "after-restart"])
def test_a_burst_published_at_the_wake_decision_is_read_once_in_order(env: Env, restart: bool) -> None:
    """The factory runs when the supervisor has decided to wake the crew, before the
    crew exists: everything it publishes reaches no open cursor and must be kept."""
    rounds = 40
    calls = 0

    def factory(_crew: Any) -> CrewBlueprint:
        nonlocal calls
        calls += 1
        if calls > 1 and env.rt is not None:  # the wake: n=1.. follow the trigger n=0
            publisher = env.hub.bind("shop")
            for n in range(1, rounds):
                publisher.publish("orders.new", {"n": n})
        return _loop(rounds)

    env.factories["loop"] = factory
    sup = env.boot()
    sup.spawn("loop", "l1")
    wait_until(lambda: _parked(env, "l1", 0), what="parked on its first wait")
    assert sup.sleep("l1") is True
    if restart:
        sup = env.restart()
        assert sup.state("l1") is LifecycleState.ASLEEP
    env.hub.bind("shop").publish("orders.new", {"n": 0})
    assert _result(env, "l1") == [{"n": n} for n in range(rounds)]
    assert sup.stats.wakes == 1


def test_a_burst_published_to_a_sleeping_loop_is_read_once_in_order(env: Env) -> None:
    rounds = 200
    env.factories["loop"] = lambda _: _loop(rounds)
    sup = env.boot()
    sup.spawn("loop", "l1")
    wait_until(lambda: _parked(env, "l1", 0), what="parked on its first wait")
    assert sup.sleep("l1") is True
    publisher = env.hub.bind("shop")
    for n in range(rounds):
        publisher.publish("orders.new", {"n": n})
    assert _result(env, "l1") == [{"n": n} for n in range(rounds)]


def _two_cursors(_crew: Any) -> CrewBlueprint:
    """Opens an ``orders`` cursor (its first read times out), parks on ``go``, then
    reads ``orders`` until ``done`` arrives there."""

    def policy(request: ModelRequest) -> ModelResponse:
        reads = _reads(request)
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


@pytest.fixture
def publish_during_save(env: Env) -> Iterator[list[str]]:
    """Publish ``orders`` events from inside the snapshot transaction (the crew is
    Snapshotting: its snapshot is taken, its cursors still open)."""
    published: list[str] = []

    def hook(point: str) -> None:  # armed by the test: not at the checkpoints of its new cursors
        if point == "lifecycle.save" and published == ["armed"]:
            published.clear()
            publisher = env.hub.bind("shop")
            for n in range(3):
                publisher.publish("orders", n)
            published.append(point)

    faults.install(hook)
    try:
        yield published
    finally:
        faults.uninstall()


def test_events_for_another_cursor_published_while_snapshotting_are_kept(
    env: Env, publish_during_save: list[str]
) -> None:
    env.factories["reader"] = _two_cursors
    sup = env.boot()
    sup.spawn("reader", "r1")
    wait_until(lambda: _parked(env, "r1", 0), what="first orders wait parked")
    env.clock.advance(1)  # the first read times out: the orders cursor stays open
    wait_until(lambda: _parked(env, "r1", 1), what="parked on go")
    wait_until(lambda: sup.durable("r1"), what="its cursors checkpointed")
    publish_during_save.append("armed")
    assert sup.sleep("r1") is True
    assert publish_during_save == ["lifecycle.save"]
    # The snapshot does not hold them: the crew is woken at once to keep them.
    wait_until(lambda: sup.state("r1") is LifecycleState.ACTIVE, what="woken to keep the events")
    shop = env.hub.bind("shop")
    shop.publish("go", {})
    shop.publish("orders", "done")
    assert _result(env, "r1") == [0, 1, 2]


def test_stored_events_merge_into_the_handover_in_store_order_around_those_heard_of() -> None:
    """Stored events were all routed before the crew went live: kept while it slept (in
    front), or kept by a publish the supervisor had not heard of yet (right after the
    stored event before it). What was heard of keeps its order: a reopened cursor's
    catch-up relies on its subscription holding the handover's tail."""
    rt = ok.Runtime.start()
    try:
        shop = rt.hub.bind("shop")
        # minted first, routed last (an outbox message, say): heard of after the trigger
        routed_late = shop.publish("orders", "late")
        asleep_1, asleep_2, trigger, unheard = (shop.publish("orders", n) for n in range(4))
    finally:
        rt.stop()
    handover = Handover(CrewId("c"), [("orders", None)])
    for message in (trigger, routed_late):
        assert handover.keep(message)
    handover.merge([asleep_1, asleep_2, trigger, unheard])
    assert [m.json() for m in handover.messages] == [0, 1, 2, 3, "late"]
    handover.merge([asleep_1, unheard])  # already there: nothing moves
    assert [m.json() for m in handover.messages] == [0, 1, 2, 3, "late"]
    assert not handover.keep(unheard)  # heard of later: once
