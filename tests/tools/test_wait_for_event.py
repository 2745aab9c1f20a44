"""wait_for_event: the next event on a topic pattern (spec §5, §5.1, §9.2).

The loop semantics (§5.2: nothing published between two calls is lost) are in
``test_subscribe_loop.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import BudgetExhaustedError, CancelledError, ToolValidationError
from orkeon_actors.tools import EventHubTools, WaitForEventResponse
from tests.tools.conftest import ENVELOPE_FIELDS, Call, check_result, wait_registered


def test_returns_the_next_event_as_an_envelope(rt: ok.Runtime, tools: EventHubTools) -> None:
    call = Call(lambda: tools.invoke("wait_for_event", {"topic": "orders.*", "timeout_ms": 60_000}))
    wait_registered(rt, "on_topic")
    publisher = rt.hub.bind("shop", "front")
    publisher.publish("payments.done", 0)
    sent = publisher.publish("orders.created", {"id": 9}, ok.PublishOptions(metadata={"region": "eu"}))
    result = check_result("wait_for_event", call.get())
    assert result["timed_out"] is False and set(result) == {"timed_out", "message"}
    message = result["message"]
    assert set(message) == ENVELOPE_FIELDS | {"payload_encoding"}
    assert message == {
        "id": sent.id,
        "topic": "orders.created",
        "source_crew_id": "shop",
        "source_agent_id": "front",
        "target_crew_id": None,
        "target_mailbox": None,
        "correlation_id": None,
        "published_at": "2026-01-01T00:00:00.000000Z",
        "metadata": {"region": "eu"},
        "payload": {"id": 9},
        "payload_encoding": "json",
        "schema_id": "_none",
    }


def test_timeout_returns_timed_out_with_the_timeout_metadata(
    rt: ok.Runtime, clock: ok.VirtualClock, tools: EventHubTools
) -> None:
    clock.advance(10)
    call = Call(lambda: tools.invoke("wait_for_event", {"topic": "orders.*", "timeout_ms": 600_000}))
    wait_registered(rt, "on_topic")
    clock.advance(599.5)
    assert not call.done
    clock.advance(0.5)
    result = check_result("wait_for_event", call.get())
    assert set(result) == {"timed_out", "metadata"}
    assert result["timed_out"] is True
    assert result["metadata"]["original_topic"] == "orders.*"
    assert result["metadata"]["original_started_at"] == "2026-01-01T00:00:10.000000Z"
    assert len(result["metadata"]["original_wait_id"]) == 26


def test_wait_forever_ignores_time(rt: ok.Runtime, clock: ok.VirtualClock, tools: EventHubTools) -> None:
    call = Call(lambda: tools.wait_for_event({"topic": "orders.#", "wait_forever": True}))
    wait_registered(rt, "on_topic")
    clock.advance(86_400 * 30)
    assert not call.done
    rt.hub.bind("shop").publish("orders.eu.created", 1)
    result = call.get()
    assert isinstance(result, WaitForEventResponse) and result.message is not None
    assert result.message.json() == 1


def test_metadata_match_filters_events(rt: ok.Runtime, tools: EventHubTools) -> None:
    call = Call(
        lambda: tools.invoke(
            "wait_for_event", {"topic": "orders.*", "timeout_ms": 1000, "metadata_match": {"region": "eu"}}
        )
    )
    wait_registered(rt, "on_topic")
    publisher = rt.hub.bind("shop")
    publisher.publish("orders.created", 1, ok.PublishOptions(metadata={"region": "us"}))
    publisher.publish("orders.created", 2, ok.PublishOptions(metadata={"region": "eu", "vip": "yes"}))
    assert call.get()["message"]["payload"] == 2


@pytest.mark.parametrize(
    ("pattern", "topic", "matches"),
    [
        ("orders.*", "orders.created", True),
        ("orders.*", "orders", False),
        ("orders.*", "orders.eu.created", False),
        ("orders.#", "orders", True),
        ("orders.#", "orders.eu.created", True),
        ("*.created", "orders.created", True),
    ],
)
def test_topic_patterns(
    rt: ok.Runtime, clock: ok.VirtualClock, tools: EventHubTools, pattern: str, topic: str, matches: bool
) -> None:
    call = Call(lambda: tools.invoke("wait_for_event", {"topic": pattern, "timeout_ms": 1000}))
    wait_registered(rt, "on_topic")
    rt.hub.bind("shop").publish(topic, "event")
    clock.advance(1)
    assert call.get()["timed_out"] is (not matches)


def test_events_scoped_to_another_crew_are_not_seen(
    rt: ok.Runtime, clock: ok.VirtualClock, tools: EventHubTools
) -> None:
    call = Call(lambda: tools.invoke("wait_for_event", {"topic": "t", "timeout_ms": 1000}))
    wait_registered(rt, "on_topic")
    publisher = rt.hub.bind("shop")
    publisher.publish("t", "not for billing", ok.PublishOptions(target_crew_id="fraud"))
    publisher.publish("t", "for billing", ok.PublishOptions(target_crew_id="billing"))
    assert call.get()["message"]["payload"] == "for billing"


def test_non_json_payloads_are_given_as_text_or_base64(rt: ok.Runtime, tools: EventHubTools) -> None:
    call = Call(lambda: [tools.invoke("wait_for_event", {"topic": "raw", "timeout_ms": 1000}) for _ in range(3)])
    wait_registered(rt, "on_topic")
    publisher = rt.hub.bind("shop")
    publisher.publish("raw", b"plain text")
    publisher.publish("raw", b"\xff\x00\x01")
    publisher.publish("raw", b"")
    results = [r["message"] for r in call.get()]
    assert [(m["payload"], m["payload_encoding"]) for m in results] == [
        ("plain text", "text"),
        ("/wAB", "base64"),
        ("", "text"),
    ]


def test_a_second_concurrent_wait_on_the_same_topic_is_refused(rt: ok.Runtime, tools: EventHubTools) -> None:
    first = Call(lambda: tools.invoke("wait_for_event", {"topic": "t", "wait_forever": True}))
    wait_registered(rt, "on_topic")
    result = tools.invoke("wait_for_event", {"topic": "t", "timeout_ms": 10}, errors="result")
    assert result["error"]["field"] == "topic"
    other = Call(lambda: tools.invoke("wait_for_event", {"topic": "u", "timeout_ms": 1000}))
    wait_registered(rt, "on_topic", 2)  # a different topic may be awaited in parallel
    publisher = rt.hub.bind("shop")
    publisher.publish("t", 1)
    publisher.publish("u", 2)
    assert first.get()["message"]["payload"] == 1
    assert other.get()["message"]["payload"] == 2


def test_cancellation_and_budget_raise_even_in_result_mode(rt: ok.Runtime, clock: ok.VirtualClock) -> None:
    budget = ok.Budget(max_wall_time=30, clock=clock)
    with EventHubTools(rt.hub.bind("billing", "budgeted"), cancel=budget.token) as tools:
        call = Call(lambda: tools.invoke("wait_for_event", {"topic": "t", "wait_forever": True}, errors="result"))
        wait_registered(rt, "on_topic")
        clock.advance(30)
        with pytest.raises(BudgetExhaustedError):
            call.get()
        token = ok.CancelToken()
        call = Call(lambda: tools.invoke("wait_for_event", {"topic": "u", "timeout_ms": 5}, cancel=token))
        wait_registered(rt, "on_topic")
        token.cancel()
        with pytest.raises(CancelledError):
            call.get()


def test_cursors_are_bounded_and_closed_with_the_tools(rt: ok.Runtime, clock: ok.VirtualClock) -> None:
    tools = EventHubTools(rt.hub.bind("billing", "lru"), max_cursors=2)

    def wait_on(topic: str) -> Call:
        return Call(lambda: tools.invoke("wait_for_event", {"topic": topic, "timeout_ms": 1}))

    for topic in ("a", "b", "c"):
        call = wait_on(topic)
        wait_registered(rt, "on_topic")
        clock.advance(0.001)
        assert call.get()["timed_out"] is True
    assert tools.cursors == [("b", None), ("c", None)]  # 'a', least recently used, was closed
    tools.close()
    assert tools.cursors == []
    with pytest.raises(ValueError, match="closed"):
        tools.invoke("wait_for_event", {"topic": "a", "timeout_ms": 1})


def test_a_cursor_keeps_at_most_max_buffered_events_and_reports_the_missed(
    rt: ok.Runtime, clock: ok.VirtualClock
) -> None:
    tools = EventHubTools(rt.hub.bind("billing", "bounded"), max_buffered=3)
    call = Call(lambda: tools.invoke("wait_for_event", {"topic": "t", "timeout_ms": 1}))
    wait_registered(rt, "on_topic")
    clock.advance(0.001)
    call.get()
    publisher = rt.hub.bind("shop")
    for n in range(5):
        publisher.publish("t", n)
    first = check_result("wait_for_event", tools.invoke("wait_for_event", {"topic": "t", "timeout_ms": 1}))
    assert (first["message"]["payload"], first["missed"]) == (2, 2)
    rest = [tools.invoke("wait_for_event", {"topic": "t", "timeout_ms": 1}) for _ in range(2)]
    assert [(r["message"]["payload"], "missed" in r) for r in rest] == [(3, False), (4, False)]
    tools.close()


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "topic"),
        ({"topic": "orders.*"}, "timeout_ms"),
        ({"topic": "orders.*", "timeout_ms": 1000, "wait_forever": True}, "wait_forever"),
        ({"topic": "orders.*", "wait_forever": False}, "wait_forever"),
        ({"topic": "orders.*", "timeout_ms": 0}, "timeout_ms"),
        ({"topic": "orders.*", "timeout_ms": -20}, "timeout_ms"),
        ({"topic": "orders.*", "timeout_ms": 0.5}, "timeout_ms"),
        ({"topic": "orders.*x", "timeout_ms": 10}, "topic"),
        ({"topic": "orders..created", "timeout_ms": 10}, "topic"),
        ({"topic": ["orders.*"], "timeout_ms": 10}, "topic"),
        ({"topic": "t", "timeout_ms": 10, "metadata_match": {"a": 1}}, "metadata_match"),
        ({"topic": "t", "timeout": 10}, "timeout"),
    ],
)
def test_invalid_calls_are_refused_naming_the_field(
    rt: ok.Runtime, tools: EventHubTools, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(ToolValidationError) as raised:
        tools.invoke("wait_for_event", arguments)
    assert raised.value.field == field
    assert rt.hub.pending_waits()["on_topic"] == 0
    assert tools.cursors == []  # a refused call opens no cursor
