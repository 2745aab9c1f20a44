"""The waiting tools' results, shared by the blocking tools and a parking crew: the
same outcome gives the same JSON on both paths (orkeon_actors.tools.waiting)."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import MailboxNotFoundError, SendTimeoutError, ToolValidationError, UnknownCorrelationError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CorrelationId, CrewId
from orkeon_actors.tools import ReceiveMessageRequest, SendRequestRequest, structure_request
from orkeon_actors.tools.waiting import (
    receive_mailbox,
    refused_result,
    send_target,
    wait_result,
)


@pytest.mark.parametrize("outcome", [SendTimeoutError("late"), UnknownCorrelationError("gone")])
def test_a_send_request_whose_wait_expired_is_timed_out_not_an_error(outcome: Exception) -> None:
    correlation = CorrelationId.new()
    result = wait_result("send_request", outcome, correlation_id=correlation)
    assert result == {"correlation_id": str(correlation), "timed_out": True, "response_payload": None}


def test_a_parked_call_and_the_blocking_tool_return_the_same_json() -> None:
    rt = ok.Runtime.start()
    try:
        tools = ok.tools.EventHubTools(rt.hub.bind("shop", "a"))
        rt.hub.bind("shop", "b").post("agent://shop/a", {"n": 1})
        blocking = tools.invoke("receive_message", {"timeout_ms": 1000})
        rt.hub.bind("shop", "b").post("agent://shop/a", {"n": 1})
        reg_message = tools.client.wait_for(
            ok.WaitOnMailbox(MailboxAddress.parse("agent://shop/a")), ok.FiniteWaitTimeout(1.0)
        )
        parked = wait_result("receive_message", reg_message)
        assert {k: v for k, v in parked["message"].items() if k not in ("id", "published_at")} == {
            k: v for k, v in blocking["message"].items() if k not in ("id", "published_at")
        }
        assert parked["timed_out"] is blocking["timed_out"] is False
        tools.close()
    finally:
        rt.stop()


def test_a_mailbox_error_names_the_argument_on_both_paths() -> None:
    error = MailboxNotFoundError(MailboxAddress.parse("agent://shop/nobody"))
    assert wait_result("receive_message", error)["error"]["field"] == "mailbox"
    assert refused_result("send_request", error)["error"]["field"] == "target_mailbox"


def test_reading_another_crews_mailbox_or_asking_a_topic_is_refused() -> None:
    own = MailboxAddress.parse("agent://shop/a")
    other = structure_request({"mailbox": "agent://bank/x", "timeout_ms": 10}, ReceiveMessageRequest)
    with pytest.raises(ToolValidationError, match="only mailboxes of your own crew") as caught:
        receive_mailbox(other, own, CrewId("shop"))
    assert caught.value.field == "mailbox"
    topic = structure_request({"target_mailbox": "topic://orders", "payload": 1, "timeout_ms": 10}, SendRequestRequest)
    with pytest.raises(ToolValidationError, match="publish_event") as refused:
        send_target(topic)
    assert refused.value.field == "target_mailbox"
