"""The cursors of a live supervised crew keep their events durably until a snapshot
reflects them (spec §5.2, §7, §11), unless the agent opted out
(``Agent(volatile_cursors=...)``). Crash behaviour: ``test_crash_live_cursor.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, query_crew
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential
from orkeon_actors.orchestration import Task as OrchestrationTask
from orkeon_actors.testing import wait_until

from .conftest import Env


def _factory(volatile: frozenset[str]) -> Any:
    def policy(_request: ModelRequest) -> ModelResponse:
        return call("wait_for_event", {"topic": "orders", "wait_forever": True})

    def factory(_crew: Any) -> CrewBlueprint:
        agent = Agent("a", ScriptedModel(policy=policy), volatile_cursors=volatile, max_turns=1000)
        return CrewBlueprint(agents=[agent], orchestration=Sequential([OrchestrationTask("t", agent.agent_id)]))

    return factory


def _kept(env: Env) -> int:
    return int(env.hub.readers.query("SELECT count(*) FROM cursor_events WHERE crew_id = 'c'")[0][0])


def _reads(env: Env) -> int:
    assert env.sup is not None
    ref = env.sup.ref("c")
    if ref is None:
        return -1
    return len([m for m in query_crew(ref, "snapshot").agents[0].conversation if m.role == "tool"])


@pytest.mark.parametrize("volatile", [frozenset(), frozenset({"orders"})], ids=["durable", "volatile"])
def test_a_live_crew_keeps_its_cursor_events_until_a_snapshot_reflects_them(env: Env, volatile: frozenset[str]) -> None:
    env.factories["reader"] = _factory(volatile)
    sup = env.boot()
    sup.spawn("reader", "c")
    env.settle("c", CrewStatus.WAITING)
    assert sup.sleep("c") is True  # its snapshot holds the orders cursor
    shop = env.hub.bind("shop")
    shop.publish("orders", 0)  # wakes it: kept for the sleeping crew, handed over at the wake
    wait_until(lambda: _reads(env) == 1, what="order 0 read")
    env.settle("c", CrewStatus.WAITING)
    for n in range(1, 4):
        shop.publish("orders", n)  # reaches the live cursor
    wait_until(lambda: _reads(env) == 4, what="orders read")
    # the row of the waking event stays until the next snapshot; the live ones only if durable
    assert _kept(env) == (4 if not volatile else 1)
    env.settle("c", CrewStatus.WAITING)
    assert sup.sleep("c") is True
    assert _kept(env) == 0  # the snapshot reflects all four: their rows went with it
    snapshot = sup.store.load("c")
    assert snapshot is not None
    tool_results = [json.loads(m.content) for m in snapshot.agents[0].conversation if m.role == "tool"]
    assert [r["message"]["payload"] for r in tool_results] == [0, 1, 2, 3]


@pytest.mark.parametrize("volatile", [frozenset(), frozenset({"orders"})], ids=["durable", "volatile"])
def test_a_crew_that_never_slept_keeps_its_cursor_events_from_its_first_wait(
    env: Env, volatile: frozenset[str]
) -> None:
    env.factories["reader"] = _factory(volatile)
    sup = env.boot()
    sup.spawn("reader", "c")
    env.settle("c", CrewStatus.WAITING)  # parked on orders: a cursor no snapshot holds
    wait_until(lambda: sup.durable("c"), what="its checkpoint committed")
    # the checkpoint is a snapshot in the store (not a sleep): restorable after a crash
    assert (sup.store.load("c") is not None) == (not volatile)
    assert sup.state("c") is LifecycleState.ACTIVE
    shop = env.hub.bind("shop")
    for n in range(3):
        shop.publish("orders", n)
    wait_until(lambda: _reads(env) == 3, what="orders read")
    assert _kept(env) == (3 if not volatile else 0)
    env.settle("c", CrewStatus.WAITING)
    assert sup.sleep("c") is True
    assert _kept(env) == 0  # the sleep's snapshot reflects them
