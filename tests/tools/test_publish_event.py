"""publish_event: broadcast on a topic (spec §5, §9.2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import ReservedTopicError, ToolValidationError
from orkeon_actors.middleware.pipeline import Next
from orkeon_actors.tools import EventHubTools, PublishEventRequest, PublishEventResponse
from tests.tools.conftest import check_result


def test_publish_reaches_subscribers_with_the_callers_identity(rt: ok.Runtime, tools: EventHubTools) -> None:
    observer = rt.hub.bind("fraud", "watcher").subscribe("orders.*")
    result = check_result(
        "publish_event",
        tools.invoke(
            "publish_event",
            {"topic": "orders.created", "payload": {"id": 42, "lines": [1, 2]}, "metadata": {"region": "eu"}},
        ),
    )
    [seen] = observer.drain()
    assert result == {"event_id": seen.id, "published_at": "2026-01-01T00:00:00.000000Z"}
    assert seen.topic == "orders.created"
    assert seen.json() == {"id": 42, "lines": [1, 2]}
    assert dict(seen.metadata) == {"region": "eu"}
    assert (seen.source_crew_id, seen.source_agent_id) == ("billing", "scorer")
    assert seen.target_crew_id is None


def test_published_at_follows_the_runtime_clock(clock: ok.VirtualClock, tools: EventHubTools) -> None:
    clock.advance(90.5)
    result = tools.invoke("publish_event", {"topic": "t", "payload": None})
    assert result["published_at"] == "2026-01-01T00:01:30.500000Z"


def test_target_crew_id_scopes_the_event(rt: ok.Runtime, tools: EventHubTools) -> None:
    mine = rt.hub.bind("billing", "other").subscribe("orders.created")
    theirs = rt.hub.bind("fraud", "x").subscribe("orders.created")
    tools.invoke("publish_event", {"topic": "orders.created", "payload": 1, "target_crew_id": "billing"})
    assert [m.json() for m in mine.drain()] == [1]
    assert theirs.drain() == []


def test_retain_as_last_value_keeps_the_event(rt: ok.Runtime, tools: EventHubTools) -> None:
    tools.invoke(
        "publish_event",
        {
            "topic": "prices.eur",
            "payload": {"rate": 1.08},
            "target_crew_id": "billing",
            "retain_as_last_value": True,
            "last_value_key": "eur",
        },
    )
    retained = rt.hub.bind("billing").get_last_value("eur", "billing")
    assert retained is not None and retained.json() == {"rate": 1.08}


def test_arguments_may_be_a_json_string_and_optionals_null(rt: ok.Runtime, tools: EventHubTools) -> None:
    observer = rt.hub.bind("fraud").subscribe("t")
    arguments = json.dumps({"topic": "t", "payload": "hi", "target_crew_id": None, "metadata": None})
    tools.invoke("publish_event", arguments)
    assert [m.json() for m in observer.drain()] == ["hi"]


def test_python_callers_get_a_dto(tools: EventHubTools) -> None:
    response = tools.publish_event(PublishEventRequest(topic="orders.created", payload=[1]))
    assert isinstance(response, PublishEventResponse)
    assert len(response.event_id) == 26


class _Recorder:
    """A middleware stage that records every message reaching the hub's publish path."""

    def __init__(self) -> None:
        self.seen: list[ok.Message] = []

    def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
        self.seen.append(message)
        return next(message)

    def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
        return next(message)


@pytest.mark.parametrize("topic", ["_system.wait_timed_out", "_system.anything.else"])
def test_reserved_topics_are_refused_before_the_hub(clock: ok.VirtualClock, topic: str) -> None:
    recorder = _Recorder()
    with ok.Runtime.start(clock=clock, middleware=[recorder]) as rt, EventHubTools(rt.hub.bind("c", "a")) as tools:
        with pytest.raises(ReservedTopicError, match="reserved"):
            tools.invoke("publish_event", {"topic": topic, "payload": 1})
        result = tools.invoke("publish_event", {"topic": topic, "payload": 1}, errors="result")
        assert result["error"]["type"] == "ReservedTopicError"
        assert result["error"]["field"] == "topic"
        assert recorder.seen == []
        tools.invoke("publish_event", {"topic": "system.ok", "payload": 1})
        assert [m.topic for m in recorder.seen] == ["system.ok"]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"payload": 1}, "topic"),
        ({"topic": "t"}, "payload"),
        ({"topic": "orders.*", "payload": 1}, "topic"),
        ({"topic": "", "payload": 1}, "topic"),
        ({"topic": 7, "payload": 1}, "topic"),
        ({"topic": "t", "payload": 1, "target_crew_id": "_system"}, "target_crew_id"),
        ({"topic": "t", "payload": 1, "target_crew_id": 3}, "target_crew_id"),
        ({"topic": "t", "payload": 1, "metadata": {"n": 1}}, "metadata"),
        ({"topic": "t", "payload": 1, "metadata": ["a"]}, "metadata"),
        ({"topic": "t", "payload": 1, "retain_as_last_value": True}, "last_value_key"),
        ({"topic": "t", "payload": 1, "last_value_key": "k"}, "last_value_key"),
        ({"topic": "t", "payload": 1, "retain_as_last_value": True, "last_value_key": ""}, "last_value_key"),
        ({"topic": "t", "payload": 1, "retain_as_last_value": "yes", "last_value_key": "k"}, "retain_as_last_value"),
        ({"topic": "t", "payload": float("nan")}, "payload"),
        ({"topic": "t", "payload": {"not", "json"}}, "payload"),
        ({"topic": "t", "payload": 1, "schema_id": "x"}, "schema_id"),
    ],
)
def test_invalid_calls_are_refused_naming_the_field(
    tools: EventHubTools, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(ToolValidationError) as raised:
        tools.invoke("publish_event", arguments)
    assert raised.value.field == field
    assert tools.invoke("publish_event", arguments, errors="result") == {
        "error": {"type": "ToolValidationError", "message": str(raised.value), "field": field}
    }
