"""A crew agent's ``wait_for_event`` loop loses nothing (spec §5.2): its calls read a
per-(topic, metadata_match) cursor, as the stand-alone tools do, and the cursor is data
in the crew's snapshot."""

from __future__ import annotations

import json
from typing import Any

import attrs

from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel, call, from_json, respond, to_json
from orkeon_actors.crew.state import AgentStatus, TopicCursorState
from orkeon_actors.model.options import PublishOptions
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.sim import Simulation


def _results(request: ModelRequest) -> list[dict[str, Any]]:
    return [json.loads(m.content) for m in request.messages if m.role == "tool" and m.name == "wait_for_event"]


def _answer(sim: Simulation, crew: str) -> Any:
    status, result, failure = sim.result().crews[crew]
    assert failure is None and status.value == "completed", (status, failure)
    assert result is not None
    return json.loads(result)


def _spawn(sim: Simulation, name: str, agent: Agent) -> str:
    return sim.spawn(name, agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))


def _ticker(sim: Simulation, ticks: int, every_ms: int) -> str:
    """A crew publishing ``orders.tick`` (payload n) every ``every_ms`` virtual ms."""

    def policy(request: ModelRequest) -> ModelResponse:
        published = sum(1 for m in request.messages if m.role == "tool" and m.name == "publish_event")
        pauses = sum(1 for m in request.messages if m.role == "tool" and m.name == "wait_for_event")
        if published == ticks:
            return respond("done")
        if pauses == published:
            return call("wait_for_event", {"topic": "ticker.never", "timeout_ms": every_ms})
        return call("publish_event", {"topic": "orders.tick", "payload": {"n": published}})

    return _spawn(sim, "ticker", Agent("t", ScriptedModel(policy=policy), max_turns=10 * ticks))


def test_a_slow_wait_for_event_loop_in_a_crew_receives_every_event_once_in_order() -> None:
    """Events arrive every 10 s; the agent spends 25 s on each one (a wait on another
    topic), so most are published between two of its calls: none is lost."""
    ticks = 6

    def worker(request: ModelRequest) -> ModelResponse:
        results = _results(request)
        orders = [r for r in results if not r["timed_out"]]
        if len(orders) == ticks:
            return respond(json.dumps({"got": [r["message"]["payload"]["n"] for r in orders]}))
        if results and not results[-1]["timed_out"]:  # just got one: "work" on it for 25 s
            return call("wait_for_event", {"topic": "work.never", "timeout_ms": 25_000})
        return call("wait_for_event", {"topic": "orders.*", "timeout_ms": 600_000})

    with Simulation(seed=0) as sim:
        crew = _spawn(sim, "loop", Agent("a", ScriptedModel(policy=worker), max_turns=100))
        _ticker(sim, ticks, every_ms=10_000)
        sim.run()
        assert _answer(sim, crew) == {"got": list(range(ticks))}
        immediate = [e for e in sim.trace.events() if e.crew == crew and e.kind == "park"]
        # 6 work pauses, but only the first orders wait had to park: the others found
        # their event already buffered in the cursor
        assert sum("orders.*" in e.detail for e in immediate) < ticks


def test_a_bounded_cursor_reports_what_it_dropped_once() -> None:
    def worker(request: ModelRequest) -> ModelResponse:
        results = _results(request)
        if len(results) == 0:  # opens the cursor; nothing yet
            return call("wait_for_event", {"topic": "burst", "timeout_ms": 1_000})
        if len(results) == 1:  # a pause during which 7 events pile up
            return call("wait_for_event", {"topic": "pause", "timeout_ms": 100_000})
        if len(results) < 6:
            return call("wait_for_event", {"topic": "burst", "timeout_ms": 1_000})
        return respond(json.dumps([(r.get("missed", 0), r.get("message", {}).get("payload")) for r in results[2:]]))

    with Simulation() as sim:
        crew = _spawn(sim, "bounded", Agent("a", ScriptedModel(policy=worker), max_buffered=3))
        sim.run(until=50)
        publisher = sim.runtime.hub.bind("shop")
        for n in range(7):
            publisher.publish("burst", {"n": n})
        sim.run()
        assert _answer(sim, crew) == [[4, {"n": 4}], [0, {"n": 5}], [0, {"n": 6}], [0, None]]


def _parked_agent_with_a_second_cursor() -> tuple[Agent, Any]:
    """An agent that opens an ``orders`` cursor, then parks on ``go``; told to go, it
    reads ``orders`` three times and answers with what it read."""

    def policy(request: ModelRequest) -> ModelResponse:
        results = _results(request)
        if len(results) == 0:
            return call("wait_for_event", {"topic": "orders", "timeout_ms": 1_000})
        if len(results) == 1:
            return call("wait_for_event", {"topic": "go", "wait_forever": True})
        if len(results) < 5:
            return call("wait_for_event", {"topic": "orders", "timeout_ms": 1_000})
        return respond(json.dumps([(r.get("missed", 0), r.get("message", {}).get("payload")) for r in results[2:]]))

    agent = Agent("a", ScriptedModel(policy=policy), max_buffered=2)
    return agent, Sequential([Task("t", "a")])


def test_cursors_survive_a_snapshot_round_trip_with_what_they_held() -> None:
    agent, orchestration = _parked_agent_with_a_second_cursor()
    with Simulation() as sim:
        crew = sim.spawn("c", agents=[agent], orchestration=orchestration)
        sim.run(until=10)  # parked on "go", its "orders" cursor open and empty
        publisher = sim.runtime.hub.bind("shop")
        for n in range(3):  # the cursor keeps the last 2 (max_buffered), one missed
            publisher.publish("orders", {"n": n})
        snap = from_json(to_json(sim.snapshot(crew)))
        [state] = snap.agents
        assert state.status is AgentStatus.WAITING
        orders, go = state.cursors  # least recently used first
        assert (orders.topic, orders.missed, [json.loads(m.payload) for m in orders.buffered]) == (
            "orders",
            1,
            [{"n": 1}, {"n": 2}],
        )
        assert (go.topic, go.buffered, go.missed) == ("go", (), 0)

        sim.restore(snap, agents=[agent], orchestration=orchestration)  # a fresh actor, a new subscription
        sim.run(until=20)
        publisher.publish("orders", {"n": 3})  # after the restore: behind what was held
        publisher.publish("go", {})
        sim.run()
        assert _answer(sim, crew) == [[1, {"n": 1}], [0, {"n": 2}], [0, {"n": 3}]]


def test_a_restored_wait_whose_cursor_holds_events_resolves_at_once() -> None:
    """The invariant behind sleeping: a parked wait never sits on a non-empty cursor."""

    def policy(request: ModelRequest) -> ModelResponse:
        results = _results(request)
        if not results:
            return call("wait_for_event", {"topic": "orders", "wait_forever": True})
        return respond(json.dumps(results[0]["message"]["payload"]))

    agent = Agent("a", ScriptedModel(policy=policy))
    orchestration = Sequential([Task("t", "a")])
    with Simulation() as sim:
        crew = sim.spawn("c", agents=[agent], orchestration=orchestration)
        sim.run(until=5)
        snap = sim.snapshot(crew)
        [state] = snap.agents
        assert state.status is AgentStatus.WAITING and [c.topic for c in state.cursors] == ["orders"]
        event = sim.runtime.hub.bind("shop").publish("elsewhere", {"held": True})  # any message will do
        cursor = TopicCursorState("orders", buffered=(attrs.evolve(event, topic="orders"),))
        held = attrs.evolve(state, cursors=(cursor,))
        sim.restore(attrs.evolve(snap, agents=(held,)), agents=[agent], orchestration=orchestration)
        sim.run()  # nothing is published: the held event resolves the wait
        assert _answer(sim, crew) == {"held": True}


def test_cursors_are_per_topic_and_metadata_match() -> None:
    """Two cursors on one topic with different metadata_match each see only theirs."""

    def policy(request: ModelRequest) -> ModelResponse:
        results = _results(request)
        if len(results) == 0:
            return call("wait_for_event", {"topic": "jobs", "metadata_match": {"k": "a"}, "timeout_ms": 1_000})
        if len(results) == 1:
            return call("wait_for_event", {"topic": "jobs", "metadata_match": {"k": "b"}, "timeout_ms": 1_000})
        if len(results) == 2:
            return call("wait_for_event", {"topic": "pause", "timeout_ms": 100_000})
        if len(results) < 5:
            match = {"k": "a"} if len(results) == 3 else {"k": "b"}
            return call("wait_for_event", {"topic": "jobs", "metadata_match": match, "timeout_ms": 1_000})
        return respond(json.dumps([r["message"]["payload"] for r in results[3:]]))

    with Simulation() as sim:
        crew = _spawn(sim, "keys", Agent("a", ScriptedModel(policy=policy)))
        sim.run(until=50)
        publisher = sim.runtime.hub.bind("shop")
        publisher.publish("jobs", {"for": "b"}, PublishOptions(metadata={"k": "b"}))
        publisher.publish("jobs", {"for": "a"}, PublishOptions(metadata={"k": "a"}))
        sim.run()
        assert _answer(sim, crew) == [{"for": "a"}, {"for": "b"}]


def test_a_wake_trigger_reaches_a_parked_cursor_wait_once_even_if_delivered_again() -> None:
    """The lifecycle hands a waking crew its trigger (``_Deliver``); it may hand the same
    message again (it was also buffered while the crew snapshotted): read once."""
    from orkeon_actors.crew.crew_actor import _Deliver

    def policy(request: ModelRequest) -> ModelResponse:
        results = _results(request)
        if len(results) < 3:
            return call("wait_for_event", {"topic": "orders", "timeout_ms": 1_000})
        return respond(json.dumps([r.get("message", {}).get("payload") for r in results]))

    with Simulation() as sim:
        crew = _spawn(sim, "woken", Agent("a", ScriptedModel(policy=policy)))
        sim.run(until=0.5)
        published = sim.runtime.hub.bind("shop").publish("elsewhere", {"n": 1})
        trigger = attrs.evolve(published, topic="orders")
        sim.crews[crew].tell(_Deliver(trigger))
        sim.crews[crew].tell(_Deliver(trigger))
        sim.run()
        assert _answer(sim, crew) == [{"n": 1}, None, None]
