"""``event.publish`` is enforced (warning or refusal) and ``event.subscribe`` bindings
are dispatched: live, across sleep and wake, and across a restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger

import orkeon_actors as ok
from orkeon_actors.crew import CrewStatus, call, query_crew
from orkeon_actors.errors import EventAclError, UndeclaredPublishError
from orkeon_actors.lifecycle import CrewSupervisor
from orkeon_actors.testing import wait_until
from tests.lifecycle.conftest import Env


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    seen: list[str] = []
    sink = logger.add(lambda m: seen.append(str(m)), level="WARNING", format="{message}")
    try:
        yield seen
    finally:
        logger.remove(sink)


def publisher(policy: str, *script: object) -> ok.CrewBlueprint:
    return (
        ok.CrewBuilder()
        .name("orders")
        .agent("a", model=ok.scripted([*script, "done"]))  # type: ignore[list-item]
        .sequential([("publish", "a")])
        .publishes("order.processed", target_crew_id="billing")
        .publishes("audit.*")
        .undeclared_publish(policy)
        .build()
    )


def test_declared_topics_pass_and_undeclared_ones_are_refused() -> None:
    stage = ok.config.EventDeclarations()
    with ok.Runtime.start(middleware=[stage]) as rt:
        assert ok.config.declarations_of(rt.hub) is stage
        stage.register("orders-1", "orders", publisher("refuse").event)
        client = rt.hub.bind("orders-1", "a")
        client.publish("audit.login", {"x": 1})
        client.publish("order.processed", {"x": 1}, options=ok.PublishOptions(target_crew_id="billing"))
        with pytest.raises(UndeclaredPublishError, match=r"'order\.processed' globally") as caught:
            client.publish("order.processed", {"x": 1})  # declared only scoped to billing
        assert isinstance(caught.value, EventAclError)
        with pytest.raises(UndeclaredPublishError, match=r"add it to event\.publish"):
            client.publish("orders.shipped", {})
        rt.hub.bind("someone-else").publish("orders.shipped", {})  # crews that declare nothing: not checked
    assert ok.config.declarations_of(rt.hub) is None  # detached with the runtime


def test_warn_publishes_anyway_and_says_so(warnings: list[str]) -> None:
    stage = ok.config.EventDeclarations()
    with ok.Runtime.start(middleware=[stage]) as rt:
        stage.register("orders-1", "orders", publisher("warn").event)
        seen: list[ok.Message] = []
        with rt.hub.system.subscribe("orders.#") as sub:
            rt.hub.bind("orders-1", "a").publish("orders.shipped", {"n": 1})
            seen.append(next(iter(sub)))
    assert seen[0].topic == "orders.shipped"
    assert any("published 'orders.shipped'" in w and "undeclared_publish: warn" in w for w in warnings)


def test_an_agents_undeclared_publish_is_its_tool_error_under_refuse() -> None:
    bp = publisher(
        "refuse",
        call("publish_event", {"topic": "audit.event", "payload": {"ok": True}}),
        call("publish_event", {"topic": "orders.secret", "payload": {}}),
    )
    with ok.Runtime.start(middleware=[ok.config.EventDeclarations()]) as rt:
        with rt.hub.system.subscribe("#") as sub:
            ref = ok.start_crew(bp, rt, crew_id="orders-1")
            wait_until(lambda: query_crew(ref, "status") is CrewStatus.COMPLETED, what="crew completed")
            snapshot = query_crew(ref, "snapshot")
            ref.stop()
            topics = []
            for message in sub:
                topics.append(message.topic)
                if message.topic == "audit.event":
                    break
    [agent] = snapshot.agents
    results = [json.loads(m.content) for m in agent.conversation if m.role == "tool"]
    assert "error" not in results[0]
    assert results[1]["error"]["type"] == "UndeclaredPublishError"
    assert "orders.secret" not in topics


def waiting_router() -> ok.CrewBlueprint:
    return (
        ok.CrewBuilder()
        .name("orders")
        .agent("router", model=ok.scripted([call("receive_message", {"wait_forever": True}), "routed"]))
        .sequential([("route the next order", "router")])
        .on_event("order.received", "agent://orders/router")
        .build()
    )


def received(snapshot: ok.crew.CrewSnapshot) -> dict[str, object]:
    [agent] = snapshot.agents
    result = next(json.loads(m.content) for m in agent.conversation if m.role == "tool")
    return dict(result)


def spawn_router(env: Env) -> tuple[CrewSupervisor, str]:
    """Boot ``env``, register the router crew, spawn one and wait until it waits."""
    sup = env.boot()
    ok.register_blueprint(sup, waiting_router())
    crew = sup.spawn("orders")
    env.settle(crew, CrewStatus.WAITING)
    return sup, str(crew)


def test_a_binding_delivers_to_a_live_crew() -> None:
    with ok.Runtime.start() as rt:
        ref = ok.start_crew(waiting_router(), rt, crew_id="orders-1")
        wait_until(lambda: query_crew(ref, "status") is CrewStatus.WAITING, what="router waiting")
        rt.hub.bind("shop").publish("order.received", {"order": 7})
        wait_until(lambda: query_crew(ref, "status") is CrewStatus.COMPLETED, what="crew completed")
        result = received(query_crew(ref, "snapshot"))
        ref.stop()
    assert result["message"]["topic"] == "order.received"  # type: ignore[index]
    assert result["message"]["payload"] == {"order": 7}  # type: ignore[index]


def test_a_binding_wakes_a_sleeping_crew_and_delivers(tmp_path: Path) -> None:
    env = Env(tmp_path / "life.db")
    try:
        sup, crew = spawn_router(env)
        assert sup.sleep(crew)
        env.asleep(crew)
        env.hub.bind("shop").publish("order.received", {"order": 8})
        assert env.summary(crew) == (CrewStatus.COMPLETED, "routed", None)
        message = received(env.snapshot(crew))["message"]
    finally:
        env.shutdown()
    assert message["payload"] == {"order": 8}  # type: ignore[index]
    assert message["metadata"]["bound_topic"] == "order.received"  # type: ignore[index]
    assert message["metadata"]["bound_source_crew_id"] == "shop"  # type: ignore[index]


def test_a_binding_holds_for_a_crew_asleep_across_a_restart(tmp_path: Path) -> None:
    env = Env(tmp_path / "life.db")
    try:
        sup, crew = spawn_router(env)
        assert sup.sleep(crew)
        env.asleep(crew)
        sup = env.restart()
        ok.register_blueprint(sup, waiting_router())
        env.hub.bind("shop").publish("order.received", {"order": 9})
        assert env.summary(crew) == (CrewStatus.COMPLETED, "routed", None)
        message = received(env.snapshot(crew))["message"]
        env.hub.bind("shop").publish("order.received", {"order": 10})  # finished: nothing to deliver to
        assert not env.hub.is_registered(ok.MailboxAddress.agent(crew, "router"))
    finally:
        env.shutdown()
    assert message["payload"] == {"order": 9}  # type: ignore[index]


def test_a_supervised_crew_gets_bound_messages_while_active_too(tmp_path: Path) -> None:
    env = Env(tmp_path / "life.db")
    try:
        _, crew = spawn_router(env)
        env.hub.bind("shop").publish("order.received", {"order": 11})
        env.hub.bind("shop").publish("order.other", {"order": 12})  # not bound
        assert env.summary(crew) == (CrewStatus.COMPLETED, "routed", None)
        message = received(env.snapshot(crew))["message"]
    finally:
        env.shutdown()
    assert message["payload"] == {"order": 11}  # type: ignore[index]
