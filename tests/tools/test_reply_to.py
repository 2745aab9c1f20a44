"""reply_to: answer a pending request, once (spec §5, §5.1)."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import ToolValidationError, UnknownCorrelationError
from orkeon_actors.tools import EventHubTools
from tests.tools.conftest import Call, check_result


def _pending_request(tools: EventHubTools, clerk: EventHubTools) -> tuple[Call, str]:
    """``tools`` sends a request to ``clerk``; returns the blocked call and the id."""
    call = Call(
        lambda: tools.invoke(
            "send_request", {"target_mailbox": "agent://billing/clerk", "payload": "ping", "timeout_ms": 60_000}
        )
    )
    request = clerk.invoke("receive_message", {"wait_forever": True})["message"]
    return call, request["correlation_id"]


def test_reply_completes_the_request(clock: ok.VirtualClock, tools: EventHubTools, clerk: EventHubTools) -> None:
    call, correlation_id = _pending_request(tools, clerk)
    clock.advance(2)
    result = check_result("reply_to", clerk.invoke("reply_to", {"correlation_id": correlation_id, "payload": "pong"}))
    assert result == {"replied_at": "2026-01-01T00:00:02.000000Z"}
    assert call.get()["response_payload"] == "pong"


def test_a_second_reply_is_refused(tools: EventHubTools, clerk: EventHubTools) -> None:
    call, correlation_id = _pending_request(tools, clerk)
    clerk.invoke("reply_to", {"correlation_id": correlation_id, "payload": 1})
    call.get()
    with pytest.raises(UnknownCorrelationError, match="already"):
        clerk.invoke("reply_to", {"correlation_id": correlation_id, "payload": 2})
    result = clerk.invoke("reply_to", {"correlation_id": correlation_id, "payload": 2}, errors="result")
    assert result["error"]["type"] == "UnknownCorrelationError"
    assert result["error"]["field"] == "correlation_id"


def test_an_unknown_correlation_id_is_refused(clerk: EventHubTools) -> None:
    unknown = str(ok.CorrelationId.new())
    with pytest.raises(UnknownCorrelationError):
        clerk.invoke("reply_to", {"correlation_id": unknown, "payload": 1})


def test_a_lowercase_correlation_id_is_accepted(tools: EventHubTools, clerk: EventHubTools) -> None:
    call, correlation_id = _pending_request(tools, clerk)
    clerk.invoke("reply_to", {"correlation_id": correlation_id.lower(), "payload": "ok"})
    assert call.get()["response_payload"] == "ok"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"payload": 1}, "correlation_id"),
        ({"correlation_id": "not-a-ulid", "payload": 1}, "correlation_id"),
        ({"correlation_id": 12, "payload": 1}, "correlation_id"),
        ({"correlation_id": "01J0000000000000000000000U", "payload": 1}, "correlation_id"),
        ({"correlation_id": "01J00000000000000000000000"}, "payload"),
        (
            {"correlation_id": "01J00000000000000000000000", "payload": 1, "target_mailbox": "crew://x"},
            "target_mailbox",
        ),
    ],
)
def test_invalid_calls_are_refused_naming_the_field(
    clerk: EventHubTools, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(ToolValidationError) as raised:
        clerk.invoke("reply_to", arguments)
    assert raised.value.field == field
