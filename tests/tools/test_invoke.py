"""``EventHubTools.invoke``: JSON in and out, errors raised or returned as results."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

import orkeon_actors as ok
from orkeon_actors.errors import HubStoppedError, ToolValidationError
from orkeon_actors.tools import EventHubTools, PostMessageRequest, PostMessageResponse, error_schema


def test_ok_tools_is_the_public_module() -> None:
    assert ok.tools.EventHubTools is EventHubTools
    assert "tools" in ok.__all__


@pytest.mark.parametrize(
    "arguments", ['{"topic": "t", "payload": [1, "two"]}', b'{"topic": "t", "payload": [1, "two"]}']
)
def test_arguments_as_a_json_string(rt: ok.Runtime, tools: EventHubTools, arguments: str | bytes) -> None:
    observer = rt.hub.bind("x").subscribe("t")
    result = tools.invoke("publish_event", arguments)
    assert json.loads(json.dumps(result)) == result
    assert [m.json() for m in observer.drain()] == [[1, "two"]]


@pytest.mark.parametrize("arguments", [None, "", "  "])
def test_no_arguments_mean_an_empty_object(tools: EventHubTools, arguments: str | None) -> None:
    result = tools.invoke("receive_message", arguments, errors="result")
    assert result["error"]["field"] == "timeout_ms"  # {}: say how long to wait


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("launch_rocket", {}, "unknown tool 'launch_rocket'"),
        ("publish_event", "{not json", "not valid JSON"),
        ("publish_event", "[1, 2]", "must be a JSON object"),
        ("publish_event", '"topic"', "must be a JSON object"),
    ],
)
def test_calls_refused_as_a_whole_name_no_field(tools: EventHubTools, name: str, arguments: Any, message: str) -> None:
    with pytest.raises(ToolValidationError, match=message) as raised:
        tools.invoke(name, arguments)
    assert raised.value.field is None
    result = tools.invoke(name, arguments, errors="result")
    jsonschema.Draft202012Validator(error_schema()).validate(result)
    assert result["error"]["field"] is None
    assert result["error"]["type"] == "ToolValidationError"


def test_unknown_fields_are_reported_before_missing_ones(tools: EventHubTools) -> None:
    result = tools.invoke("wait_for_event", {"topik": "orders.*", "timeout_ms": 5}, errors="result")
    assert result["error"]["field"] == "topik"
    assert "topic, timeout_ms, wait_forever, metadata_match" in result["error"]["message"]


def test_errors_mode_is_checked(tools: EventHubTools) -> None:
    with pytest.raises(ValueError, match="errors"):
        tools.invoke("get_last_value", {"key": "k"}, errors="ignore")  # type: ignore[arg-type]


def test_a_stopped_runtime_raises_even_in_result_mode(clock: ok.VirtualClock) -> None:
    rt = ok.Runtime.start(clock=clock)
    tools = EventHubTools(rt.hub.bind("c", "a"))
    rt.stop()
    with pytest.raises(HubStoppedError):
        tools.invoke("publish_event", {"topic": "t", "payload": 1}, errors="result")


def test_typed_methods_take_a_dto_or_a_mapping(tools: EventHubTools, clerk: EventHubTools) -> None:
    by_dto = tools.post_message(PostMessageRequest(target_mailbox="agent://billing/clerk", payload=1))
    by_mapping = tools.post_message({"target_mailbox": "agent://billing/clerk", "payload": 2})
    assert isinstance(by_dto, PostMessageResponse) and isinstance(by_mapping, PostMessageResponse)
    with pytest.raises(ToolValidationError) as raised:
        PostMessageRequest(target_mailbox="agent://billing", payload=1)
    assert raised.value.field == "target_mailbox"


def test_a_model_can_correct_itself_from_the_error_result(tools: EventHubTools) -> None:
    """The loop an agent runs: a refused call, then the corrected one."""
    first = tools.invoke("publish_event", {"topic": "orders.*", "payload": 1}, errors="result")
    assert first["error"]["field"] == "topic" and "wildcards" in first["error"]["message"]
    second = tools.invoke("publish_event", {"topic": "orders.created", "payload": 1}, errors="result")
    assert "error" not in second and "event_id" in second
