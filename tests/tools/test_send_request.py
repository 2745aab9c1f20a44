"""send_request: request-response with a mandatory timeout (spec §5, §5.1, §9.3)."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import MailboxNotFoundError, ToolValidationError, UnknownCorrelationError
from orkeon_actors.tools import EventHubTools, SendRequestResponse
from tests.tools.conftest import Call, check_result, wait_registered


def test_the_reply_comes_back_with_its_correlation_id(
    rt: ok.Runtime, tools: EventHubTools, clerk: EventHubTools
) -> None:
    call = Call(
        lambda: tools.invoke(
            "send_request", {"target_mailbox": "agent://billing/clerk", "payload": {"q": "total?"}, "timeout_ms": 5000}
        )
    )
    request = clerk.invoke("receive_message", {"wait_forever": True})["message"]
    assert request["topic"] == "_system.send"
    assert request["payload"] == {"q": "total?"}
    clerk.invoke("reply_to", {"correlation_id": request["correlation_id"], "payload": {"total": 12.5}})
    result = check_result("send_request", call.get())
    assert result == {
        "correlation_id": request["correlation_id"],
        "timed_out": False,
        "response_payload": {"total": 12.5},
    }
    assert rt.hub.pending_waits()["on_reply"] == 0


def test_a_null_reply_is_not_a_timeout(tools: EventHubTools, clerk: EventHubTools) -> None:
    call = Call(
        lambda: tools.invoke(
            "send_request", {"target_mailbox": "agent://billing/clerk", "payload": 1, "timeout_ms": 5000}
        )
    )
    request = clerk.invoke("receive_message", {"wait_forever": True})["message"]
    clerk.invoke("reply_to", {"correlation_id": request["correlation_id"], "payload": None})
    assert call.get()["timed_out"] is False
    assert call.get()["response_payload"] is None


def test_no_reply_in_time_is_a_timeout_result(
    rt: ok.Runtime, clock: ok.VirtualClock, tools: EventHubTools, clerk: EventHubTools
) -> None:
    call = Call(
        lambda: tools.send_request({"target_mailbox": "agent://billing/clerk", "payload": "ping", "timeout_ms": 30_000})
    )
    wait_registered(rt, "on_reply")  # the requester waits on a hub waiter, not in a loop
    clock.advance(29.5)
    assert not call.done
    clock.advance(0.5)
    result = call.get()
    assert isinstance(result, SendRequestResponse)
    assert result.timed_out is True and result.response_payload is None
    check_result("send_request", ok.tools.unstructure(result))
    # The request expired with the timeout: answering it now is refused.
    request = clerk.invoke("receive_message", {"timeout_ms": 1})["message"]
    assert request["correlation_id"] == result.correlation_id
    with pytest.raises(UnknownCorrelationError):
        clerk.invoke("reply_to", {"correlation_id": request["correlation_id"], "payload": "late"})


def test_an_unregistered_mailbox_is_a_typed_error(tools: EventHubTools) -> None:
    with pytest.raises(MailboxNotFoundError):
        tools.invoke("send_request", {"target_mailbox": "agent://billing/nobody", "payload": 1, "timeout_ms": 10})
    result = tools.invoke(
        "send_request", {"target_mailbox": "crew://ghosts", "payload": 1, "timeout_ms": 10}, errors="result"
    )
    assert result["error"]["type"] == "MailboxNotFoundError"
    assert result["error"]["field"] == "target_mailbox"


_TO = "agent://billing/clerk"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"target_mailbox": _TO, "payload": 1}, "timeout_ms"),
        ({"target_mailbox": _TO, "payload": 1, "timeout_ms": None}, "timeout_ms"),
        ({"target_mailbox": _TO, "payload": 1, "wait_forever": True}, "wait_forever"),
        ({"target_mailbox": _TO, "payload": 1, "timeout_ms": 10, "wait_forever": True}, "wait_forever"),
        ({"target_mailbox": _TO, "payload": 1, "timeout_ms": 0}, "timeout_ms"),
        ({"target_mailbox": _TO, "payload": 1, "timeout_ms": -1000}, "timeout_ms"),
        ({"target_mailbox": _TO, "payload": 1, "timeout_ms": 1.5}, "timeout_ms"),
        ({"target_mailbox": _TO, "payload": 1, "timeout_ms": "1000"}, "timeout_ms"),
        ({"target_mailbox": _TO, "payload": 1, "timeout_ms": True}, "timeout_ms"),
        ({"target_mailbox": _TO, "payload": 1, "timeout_ms": 2**31}, "timeout_ms"),
        ({"target_mailbox": "topic://orders", "payload": 1, "timeout_ms": 10}, "target_mailbox"),
        ({"target_mailbox": "agent:/billing/clerk", "payload": 1, "timeout_ms": 10}, "target_mailbox"),
        ({"payload": 1, "timeout_ms": 10}, "target_mailbox"),
    ],
)
def test_invalid_calls_are_refused_naming_the_field(
    rt: ok.Runtime, tools: EventHubTools, arguments: dict[str, Any], field: str
) -> None:
    recipient = rt.hub.register_mailbox(_TO)
    with pytest.raises(ToolValidationError) as raised:
        tools.invoke("send_request", arguments)
    assert raised.value.field == field
    assert recipient.depth() == 0  # refused before anything was sent


def test_forever_is_refused_with_a_reason(tools: EventHubTools) -> None:
    result = tools.invoke("send_request", {"target_mailbox": _TO, "payload": 1, "wait_forever": True}, errors="result")
    assert "finite timeout_ms" in result["error"]["message"]


def test_an_integral_float_timeout_is_accepted(tools: EventHubTools, clerk: EventHubTools) -> None:
    call = Call(lambda: tools.invoke("send_request", {"target_mailbox": _TO, "payload": 1, "timeout_ms": 5000.0}))
    request = clerk.invoke("receive_message", {"wait_forever": True})["message"]
    clerk.invoke("reply_to", {"correlation_id": request["correlation_id"], "payload": "ok"})
    assert call.get()["response_payload"] == "ok"
