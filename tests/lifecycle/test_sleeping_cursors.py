"""Events for a sleeping crew's *other* cursors (spec §5.2, §7): an agent parked on one
topic keeps cursors on others; what is published on those while the crew sleeps does
not wake it, is kept in the store (bounded per cursor), and is read after the wake, in
order, once each, also across a restart of the process."""

from __future__ import annotations

import json
from typing import Any

import apsw
import attrs
import pytest
from loguru import logger

from orkeon_actors import CrewId, PublishOptions
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.store import cursor_events
from orkeon_actors.testing import wait_until

from .conftest import Env


def _reads(request: ModelRequest) -> list[dict[str, Any]]:
    return [json.loads(m.content) for m in request.messages if m.role == "tool" and m.name == "wait_for_event"]


def _two_cursors(_crew: Any) -> CrewBlueprint:
    """Opens an ``orders`` cursor (its first read times out), parks on ``go``, then
    reads ``orders`` until ``done``; answers the payloads read and the ``missed``
    counts reported."""

    def policy(request: ModelRequest) -> ModelResponse:
        reads = _reads(request)
        if not reads:
            return call("wait_for_event", {"topic": "orders", "timeout_ms": 1_000})
        if len(reads) == 1:
            return call("wait_for_event", {"topic": "go", "wait_forever": True})
        later = reads[2:]
        payloads = [r.get("message", {}).get("payload") for r in later]
        if payloads and payloads[-1] == "done":
            return respond(json.dumps({"read": payloads[:-1], "missed": sum(r.get("missed", 0) for r in later)}))
        return call("wait_for_event", {"topic": "orders", "wait_forever": True})

    agent = Agent("a", ScriptedModel(policy=policy), max_turns=100)
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))


def _parked(env: Env, crew: str, reads: int) -> bool:
    snapshot = env.snapshot(crew)
    return (
        snapshot.status == "waiting_for_message"
        and len([m for m in snapshot.agents[0].conversation if m.role == "tool"]) == reads
    )


def _asleep_on_go(env: Env) -> Any:
    env.factories["reader"] = _two_cursors
    sup = env.boot()
    sup.spawn("reader", "r1")
    wait_until(lambda: _parked(env, "r1", 0), what="first orders wait parked")
    env.clock.advance(1)  # the first read times out: the orders cursor stays open
    wait_until(lambda: _parked(env, "r1", 1), what="parked on go")
    assert sup.sleep("r1") is True
    return sup


def _kept(env: Env, crew: str) -> int:
    [(count,)] = env.hub.readers.query("SELECT count(*) FROM cursor_events WHERE crew_id = ?", (crew,))
    return int(count)


def _result(env: Env, crew: str) -> Any:
    assert env.settle(crew, CrewStatus.COMPLETED, CrewStatus.FAILED) is CrewStatus.COMPLETED
    _, result, _ = env.summary(crew)
    return json.loads(result)


@pytest.mark.parametrize("restart", [False, True], ids=["same-run", "restart-between"])
def test_events_on_another_cursor_during_sleep_are_read_after_the_wake(env: Env, restart: bool) -> None:
    sup = _asleep_on_go(env)
    shop = env.hub.bind("shop")
    for n in range(5):
        shop.publish("orders", n)
    scoped = PublishOptions(target_crew_id=CrewId("someone-else"))
    shop.publish("orders", "for another crew", scoped)  # scoped away: not kept for r1
    wait_until(lambda: _kept(env, "r1") == 5, what="five orders kept for the sleeping cursor")
    assert sup.state("r1") is LifecycleState.ASLEEP and sup.stats.wakes == 0  # kept, not woken
    if restart:
        sup = env.restart()
        shop = env.hub.bind("shop")
        assert sup.state("r1") is LifecycleState.ASLEEP
        for n in range(5, 8):
            shop.publish("orders", n)
        wait_until(lambda: _kept(env, "r1") == 8, what="orders kept after the restart too")
    shop.publish("go", {})
    wait_until(lambda: _parked(env, "r1", 2 + (8 if restart else 5)), what="every kept order read")
    shop.publish("orders", "done")
    assert _result(env, "r1") == {"read": list(range(8 if restart else 5)), "missed": 0}


def test_kept_events_are_deleted_with_the_next_snapshot_and_not_read_twice(env: Env) -> None:
    sup = _asleep_on_go(env)
    shop = env.hub.bind("shop")
    for n in range(3):
        shop.publish("orders", n)
    wait_until(lambda: _kept(env, "r1") == 3, what="kept")
    shop.publish("go", {})
    wait_until(lambda: _parked(env, "r1", 5), what="the three kept orders read, parked on orders")
    # the three orders and the "go" that woke it (kept durably by its publish): handed
    # over, not yet reflected by a snapshot
    assert _kept(env, "r1") == 4
    assert sup.sleep("r1") is True
    assert _kept(env, "r1") == 0  # the snapshot transaction deleted them
    sup = env.restart()
    shop = env.hub.bind("shop")
    shop.publish("orders", 3)  # the parked wait is on orders now: wakes it
    wait_until(lambda: sup.ref("r1") is not None and _parked(env, "r1", 6), what="woken, fourth order read")
    shop.publish("orders", "done")
    assert _result(env, "r1") == {"read": [0, 1, 2, 3], "missed": 0}


def test_a_sleeping_cursor_keeps_its_newest_events_and_reports_the_drops(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cursor_events, "MAX_KEPT", 3)
    sup = _asleep_on_go(env)
    shop = env.hub.bind("shop")
    for n in range(5):
        shop.publish("orders", n)
    wait_until(lambda: sup.stats.wakes == 0 and _kept(env, "r1") == 3, what="bounded to three")
    wait_until(
        lambda: (
            env.hub.readers.query("SELECT missed FROM sleeping_cursors WHERE crew_id = 'r1' AND topic = 'orders'")
            == [(2,)]
        ),
        what="two drops counted",
    )
    shop.publish("go", {})
    wait_until(lambda: _parked(env, "r1", 5), what="the kept orders read")
    shop.publish("orders", "done")
    assert _result(env, "r1") == {"read": [2, 3, 4], "missed": 2}


def test_the_store_bounds_each_sleeping_cursor(env: Env) -> None:
    """``keep_event`` at the store level: per cursor, the newest ``limit`` kept."""
    _asleep_on_go(env)
    key = cursor_events.cursor_key("orders", None)
    shop = env.hub.bind("shop")
    messages = [shop.publish("elsewhere", n) for n in range(4)]  # no subscriber: just messages
    for message in messages:
        env.hub.writer.execute(lambda conn, m=message: cursor_events.keep_event(conn, "r1", [key], m, 2))
    with env.hub.readers.connection() as conn:
        kept, missed, upto = cursor_events.load_kept(conn, "r1")
    assert [m.id for m in kept] == [m.id for m in messages[2:]]
    assert missed == {key: 2} and upto > 0


def test_an_event_kept_for_a_parked_wait_wakes_the_crew_at_the_next_boot(env: Env) -> None:
    """Kept for the cursor of the wait it is parked on (the supervisor was stopping and
    did not wake it): the next boot wakes it, and the wait reads the event."""
    _asleep_on_go(env)
    elsewhere = env.hub.bind("shop").publish("elsewhere", "kept while stopping")  # wakes nothing
    go = attrs.evolve(elsewhere, topic="go")  # as if published on go while the supervisor stopped
    key = cursor_events.cursor_key("go", None)
    env.hub.writer.execute(lambda conn: cursor_events.keep_event(conn, "r1", [key], go))
    sup = env.restart()
    wait_until(lambda: sup.ref("r1") is not None and _parked(env, "r1", 2), what="woken at boot, go read")
    assert sup.stats.wakes == 1
    env.hub.bind("shop").publish("orders", "done")
    assert _result(env, "r1") == {"read": [], "missed": 0}


def test_a_publish_waits_for_its_kept_copy_and_a_wake_hands_it_over_once(env: Env) -> None:
    sup = _asleep_on_go(env)
    shop = env.hub.bind("shop")
    shop.publish("orders", 0)
    assert _kept(env, "r1") == 1  # committed before publish returned: no waiting needed
    shop.publish("go", {})  # wakes it: kept too, read back at the wake, handed over once
    wait_until(lambda: _parked(env, "r1", 3), what="the kept order read, parked on orders")
    shop.publish("orders", "done")
    assert _result(env, "r1") == {"read": [0], "missed": 0}
    assert sup.stats.wakes == 1


def test_a_failed_keep_is_logged_and_the_wake_goes_on(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    sup = _asleep_on_go(env)

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise apsw.IOError("disk gone")

    monkeypatch.setattr(cursor_events, "keep_event", broken)
    logged: list[str] = []
    sink = logger.add(lambda m: logged.append(str(m)), level="ERROR")
    try:
        env.hub.bind("shop").publish("go", {})  # returns: the event was published
    finally:
        logger.remove(sink)
    assert any("not kept for its sleeping crews" in line and "disk gone" in line for line in logged)
    wait_until(lambda: _parked(env, "r1", 2), what="woken by the live event all the same")
    assert sup.stats.wakes == 1 and _kept(env, "r1") == 0
