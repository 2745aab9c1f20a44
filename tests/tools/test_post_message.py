"""post_message: fire-and-forget to one mailbox (spec §5, §6.2)."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import MailboxNotFoundError, ReservedTopicError, ToolValidationError
from orkeon_actors.tools import EventHubTools
from tests.tools.conftest import check_result


def test_post_lands_in_the_recipients_mailbox(tools: EventHubTools, clerk: EventHubTools) -> None:
    result = check_result(
        "post_message",
        tools.invoke(
            "post_message",
            {"target_mailbox": "agent://billing/clerk", "payload": {"invoice": 7}, "metadata": {"k": "v"}},
        ),
    )
    assert result["posted_at"] == "2026-01-01T00:00:00.000000Z"
    received = clerk.invoke("receive_message", {"timeout_ms": 1000})
    message = received["message"]
    assert message["id"] == result["message_id"]
    assert message["payload"] == {"invoice": 7}
    assert message["metadata"] == {"k": "v"}
    assert message["source_crew_id"] == "billing" and message["source_agent_id"] == "scorer"
    assert message["target_mailbox"] == "agent://billing/clerk"
    assert message["target_crew_id"] == "billing"
    assert message["correlation_id"] is None


def test_posts_are_received_in_order(tools: EventHubTools, clerk: EventHubTools) -> None:
    for n in range(20):
        tools.invoke("post_message", {"target_mailbox": "agent://billing/clerk", "payload": n})
    received = [clerk.invoke("receive_message", {"timeout_ms": 1000})["message"]["payload"] for _ in range(20)]
    assert received == list(range(20))


def test_posting_to_a_topic_address_publishes(rt: ok.Runtime, tools: EventHubTools) -> None:
    observer = rt.hub.bind("fraud").subscribe("audit.event")
    tools.invoke("post_message", {"target_mailbox": "topic://audit.event", "payload": "x"})
    assert [m.json() for m in observer.drain()] == ["x"]


def test_posting_to_a_reserved_topic_address_is_refused(rt: ok.Runtime, tools: EventHubTools) -> None:
    observer = rt.hub.system.subscribe("_system.#")
    with pytest.raises(ReservedTopicError):
        tools.invoke("post_message", {"target_mailbox": "topic://_system.wait_timed_out", "payload": 1})
    result = tools.invoke(
        "post_message", {"target_mailbox": "topic://_system.wait_timed_out", "payload": 1}, errors="result"
    )
    assert result["error"]["field"] == "target_mailbox"
    assert observer.drain() == []


def test_an_unregistered_mailbox_is_a_typed_error(tools: EventHubTools) -> None:
    with pytest.raises(MailboxNotFoundError):
        tools.invoke("post_message", {"target_mailbox": "agent://billing/nobody", "payload": 1})
    result = tools.invoke("post_message", {"target_mailbox": "agent://billing/nobody", "payload": 1}, errors="result")
    assert result["error"]["type"] == "MailboxNotFoundError"
    assert result["error"]["field"] == "target_mailbox"
    assert "register" in result["error"]["message"]


@pytest.mark.parametrize(
    "address", ["", "billing/clerk", "agent://billing", "agent://billing/clerk/extra", "mailto://x", "agent://-x/y", 5]
)
def test_a_malformed_address_is_refused_naming_the_field(tools: EventHubTools, address: Any) -> None:
    with pytest.raises(ToolValidationError) as raised:
        tools.invoke("post_message", {"target_mailbox": address, "payload": 1})
    assert raised.value.field == "target_mailbox"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"payload": 1}, "target_mailbox"),
        ({"target_mailbox": "agent://billing/clerk"}, "payload"),
        ({"target_mailbox": "agent://billing/clerk", "payload": 1, "metadata": {"a": None}}, "metadata"),
        ({"target_mailbox": "agent://billing/clerk", "payload": 1, "timeout_ms": 5}, "timeout_ms"),
    ],
)
def test_invalid_calls_are_refused_naming_the_field(
    tools: EventHubTools, clerk: EventHubTools, arguments: dict[str, Any], field: str
) -> None:
    result = tools.invoke("post_message", arguments, errors="result")
    assert result["error"]["type"] == "ToolValidationError"
    assert result["error"]["field"] == field
