"""get_last_value: read a retained slot; ``found`` separates null from absent (spec §5)."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import EventAclError, ToolValidationError
from orkeon_actors.tools import EventHubTools
from tests.tools.conftest import check_result


def _retain(tools: EventHubTools, key: str, payload: Any, crew: str | None = "billing") -> None:
    arguments: dict[str, Any] = {
        "topic": "state",
        "payload": payload,
        "retain_as_last_value": True,
        "last_value_key": key,
    }
    if crew is not None:
        arguments["target_crew_id"] = crew
    tools.invoke("publish_event", arguments)


def test_an_absent_key_is_not_found(tools: EventHubTools) -> None:
    result = check_result("get_last_value", tools.invoke("get_last_value", {"key": "nothing"}))
    assert result == {"found": False, "value": None, "set_at": None}


def test_a_retained_null_is_found(clock: ok.VirtualClock, tools: EventHubTools) -> None:
    clock.advance(5)
    _retain(tools, "k", None)
    result = check_result("get_last_value", tools.invoke("get_last_value", {"key": "k"}))
    assert result == {"found": True, "value": None, "set_at": "2026-01-01T00:00:05.000000Z"}


def test_the_latest_value_wins(clock: ok.VirtualClock, tools: EventHubTools) -> None:
    _retain(tools, "k", {"v": 1})
    clock.advance(1)
    _retain(tools, "k", {"v": 2})
    result = tools.invoke("get_last_value", {"key": "k"})
    assert result["value"] == {"v": 2}
    assert result["set_at"] == "2026-01-01T00:00:01.000000Z"


def test_crew_scope_defaults_to_the_callers_crew(tools: EventHubTools, outsider: EventHubTools) -> None:
    _retain(tools, "k", "billing's")
    assert tools.invoke("get_last_value", {"key": "k"})["value"] == "billing's"
    assert outsider.invoke("get_last_value", {"key": "k"})["found"] is False
    assert tools.invoke("get_last_value", {"key": "k", "crew_scope": "billing"})["value"] == "billing's"


def test_another_crews_scope_is_refused(tools: EventHubTools, outsider: EventHubTools) -> None:
    """Issue 15: crew_scope naming another crew was an escape (it read billing's value)."""
    _retain(tools, "k", "billing's")
    with pytest.raises(EventAclError):
        outsider.invoke("get_last_value", {"key": "k", "crew_scope": "billing"})
    result = outsider.invoke("get_last_value", {"key": "k", "crew_scope": "billing"}, errors="result")
    assert result["error"]["type"] == "EventAclError"
    assert result["error"]["field"] == "crew_scope"
    assert "billing's" not in str(result)


def test_the_global_slot_is_read_with_the_global_scope(tools: EventHubTools) -> None:
    _retain(tools, "k", "global", crew=None)
    assert tools.invoke("get_last_value", {"key": "k"})["found"] is False
    assert tools.invoke("get_last_value", {"key": "k", "crew_scope": "_global"})["value"] == "global"


def test_a_non_json_retained_payload_is_returned_as_text(rt: ok.Runtime, tools: EventHubTools) -> None:
    rt.hub.bind("billing").publish(
        "state",
        b"plain words",
        ok.PublishOptions(target_crew_id="billing", retain_as_last_value=True, last_value_key="t"),
    )
    assert tools.invoke("get_last_value", {"key": "t"})["value"] == "plain words"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "key"),
        ({"key": ""}, "key"),
        ({"key": 3}, "key"),
        ({"key": "k", "crew_scope": "_system"}, "crew_scope"),
        ({"key": "k", "crew_scope": "no spaces"}, "crew_scope"),
        ({"key": "k", "crew_scope": ["billing"]}, "crew_scope"),
        ({"key": "k", "crew": "billing"}, "crew"),
    ],
)
def test_invalid_calls_are_refused_naming_the_field(
    tools: EventHubTools, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(ToolValidationError) as raised:
        tools.invoke("get_last_value", arguments)
    assert raised.value.field == field
