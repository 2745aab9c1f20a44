"""Spec §5.2 / §16.2: an agent looping on ``wait_for_event`` (or ``receive_message``)
sleeps between iterations; the next message wakes it and is delivered by the next
iteration; none is lost."""

from __future__ import annotations

import json
from typing import Any

from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

from .conftest import Env


def _payloads(messages: Any) -> list[Any]:
    return [json.loads(m.content)["message"]["payload"] for m in messages if m.role == "tool"]


def _loop(tool: str, arguments: dict[str, Any], rounds: int) -> CrewBlueprint:
    def policy(request: ModelRequest) -> ModelResponse:
        seen = _payloads(request.messages)
        if len(seen) >= rounds:
            return respond(json.dumps(seen))
        return call(tool, arguments)

    agent = Agent("a", ScriptedModel(policy=policy))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("loop", agent.agent_id)]))


def _received(env: Env, crew: str) -> list[Any]:
    return _payloads(env.snapshot(crew).agents[0].conversation)


def _parked_at_iteration(env: Env, crew: str, n: int) -> None:
    wait_until(
        lambda: len(_received(env, crew)) == n and env.status(crew) is CrewStatus.WAITING,
        what=f"{crew} waiting again after {n} messages",
    )


def _final(env: Env, crew: str) -> list[Any]:
    assert env.settle(crew, CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    conversation = env.snapshot(crew).agents[0].conversation
    answer: list[Any] = json.loads([m for m in conversation if m.role == "assistant"][-1].content)
    return answer


def test_wait_for_event_loop_sleeps_between_iterations_and_loses_nothing(env: Env) -> None:
    rounds = 5
    env.factories["loop"] = lambda _: _loop("wait_for_event", {"topic": "orders.*", "timeout_ms": 600_000}, rounds)
    sup = env.boot()
    sup.spawn("loop", "l1")
    publisher = env.hub.bind("shop")
    wait_ids = []
    for i in range(rounds):
        _parked_at_iteration(env, "l1", i)
        assert sup.sleep("l1") is True
        assert sup.state("l1") is LifecycleState.ASLEEP and sup.ref("l1") is None
        [wait] = env.hub.load_pending_waits("l1")  # one PendingWait per iteration
        assert wait.expires_at is not None and wait.topic == "orders.*"
        wait_ids.append(wait.wait_id)
        publisher.publish("orders.new", {"n": i})
    assert _final(env, "l1") == [{"n": i} for i in range(rounds)]
    assert len(set(wait_ids)) == rounds
    assert sup.stats.sleeps == rounds and sup.stats.wakes == rounds and sup.stats.expiries == 0


def test_receive_message_loop_gets_a_burst_posted_while_asleep_in_order(env: Env) -> None:
    rounds = 6
    env.factories["loop"] = lambda _: _loop("receive_message", {"wait_forever": True}, rounds)
    sup = env.boot()
    sup.spawn("loop", "l1")
    sender = env.hub.bind("shop", "desk")
    _parked_at_iteration(env, "l1", 0)
    assert sup.sleep("l1") is True
    sender.post("agent://l1/a", {"n": 0})  # wakes it; the next iteration takes it
    _parked_at_iteration(env, "l1", 1)
    assert sup.sleep("l1") is True
    for i in range(1, rounds):  # a burst while it sleeps: kept, delivered one per iteration
        sender.post("agent://l1/a", {"n": i})
    assert _final(env, "l1") == [{"n": i} for i in range(rounds)]


def test_a_loop_iteration_that_times_out_while_asleep_continues_the_loop(env: Env) -> None:
    def policy(request: ModelRequest) -> ModelResponse:
        results = [json.loads(m.content) for m in request.messages if m.role == "tool"]
        if len(results) >= 2:
            return respond(json.dumps([r["timed_out"] for r in results]))
        return call("wait_for_event", {"topic": "orders.*", "timeout_ms": 60_000})

    agent = Agent("a", ScriptedModel(policy=policy))
    env.factories["loop"] = lambda _: CrewBlueprint(
        agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)])
    )
    sup = env.boot()
    sup.spawn("loop", "l1")
    env.settle("l1")
    assert sup.sleep("l1") is True
    env.clock.advance(61)  # the first iteration times out: wakes, loops, waits again
    wait_until(
        lambda: (
            sup.ref("l1") is not None
            and len([m for m in env.snapshot("l1").agents[0].conversation if m.role == "tool"]) == 1
            and env.status("l1") is CrewStatus.WAITING
        ),
        what="second iteration parked",
    )
    assert sup.sleep("l1") is True
    env.hub.bind("p").publish("orders.x", {"n": 1})
    assert env.settle("l1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    conversation = env.snapshot("l1").agents[0].conversation
    assert json.loads([m for m in conversation if m.role == "assistant"][-1].content) == [True, False]
