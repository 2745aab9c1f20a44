"""receive_message: take the oldest message of a mailbox of the caller's crew (§5, §5.1, §10.3)."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import CancelledError, MailboxNotFoundError, ToolValidationError
from orkeon_actors.tools import EventHubTools
from tests.tools.conftest import ENVELOPE_FIELDS, Call, check_result, wait_registered


def test_the_default_mailbox_is_the_agents_own_registered_at_construction(rt: ok.Runtime, tools: EventHubTools) -> None:
    assert str(tools.own_mailbox) == "agent://billing/scorer"
    # Reachable before the agent ever called receive_message.
    rt.hub.bind("fraud", "checker").post("agent://billing/scorer", {"hello": 1})
    result = check_result("receive_message", tools.invoke("receive_message", {"timeout_ms": 1000}))
    message = result["message"]
    assert set(message) == ENVELOPE_FIELDS | {"payload_encoding"}
    assert message["payload"] == {"hello": 1} and message["payload_encoding"] == "json"
    assert message["source_crew_id"] == "fraud" and message["source_agent_id"] == "checker"
    assert message["published_at"] == "2026-01-01T00:00:00.000000Z"
    assert result["timed_out"] is False and "metadata" not in result


def test_a_request_carries_its_correlation_id(rt: ok.Runtime, tools: EventHubTools) -> None:
    request = rt.hub.bind("fraud", "checker").request("agent://billing/scorer", "check?", 30)
    message = tools.invoke("receive_message", {"wait_forever": True})["message"]
    assert message["correlation_id"] == request.correlation_id
    assert message["topic"] == "_system.send"


def test_timeout_returns_timed_out_with_the_timeout_metadata(
    rt: ok.Runtime, clock: ok.VirtualClock, tools: EventHubTools
) -> None:
    call = Call(lambda: tools.invoke("receive_message", {"timeout_ms": 1500}))
    wait_registered(rt, "on_mailbox")
    clock.advance(1.5)
    result = check_result("receive_message", call.get())
    assert result["timed_out"] is True and "message" not in result
    metadata = result["metadata"]
    assert metadata["original_topic"] == "agent://billing/scorer"
    assert metadata["original_started_at"] == "2026-01-01T00:00:00.000000Z"
    assert len(metadata["original_wait_id"]) == 26


def test_wait_forever_blocks_until_a_message_arrives(
    rt: ok.Runtime, clock: ok.VirtualClock, tools: EventHubTools, clerk: EventHubTools
) -> None:
    call = Call(lambda: tools.invoke("receive_message", {"wait_forever": True}))
    wait_registered(rt, "on_mailbox")
    clock.advance(86_400 * 365)
    assert not call.done
    clerk.invoke("post_message", {"target_mailbox": "agent://billing/scorer", "payload": "late"})
    assert call.get()["message"]["payload"] == "late"


def test_a_cancelled_wait_raises_even_in_result_mode(rt: ok.Runtime, tools: EventHubTools) -> None:
    token = ok.CancelToken()
    call = Call(lambda: tools.invoke("receive_message", {"wait_forever": True}, errors="result", cancel=token))
    wait_registered(rt, "on_mailbox")
    token.cancel()
    with pytest.raises(CancelledError):
        call.get()


def test_another_mailbox_of_the_same_crew_may_be_read(
    rt: ok.Runtime, tools: EventHubTools, clerk: EventHubTools
) -> None:
    crew_box = rt.hub.register_mailbox("crew://billing")
    rt.hub.bind("fraud").post("crew://billing", "for the crew")
    rt.hub.bind("fraud").post("agent://billing/clerk", "for the clerk")
    assert tools.invoke("receive_message", {"timeout_ms": 10, "mailbox": "crew://billing"})["message"]["payload"] == (
        "for the crew"
    )
    got = tools.invoke("receive_message", {"timeout_ms": 10, "mailbox": "agent://billing/clerk"})
    assert got["message"]["payload"] == "for the clerk"
    crew_box.close()


@pytest.mark.parametrize(
    "mailbox", ["agent://fraud/checker", "crew://fraud", "client://studio", "topic://orders.created"]
)
def test_mailboxes_of_other_crews_and_external_ones_are_refused(
    rt: ok.Runtime, tools: EventHubTools, outsider: EventHubTools, mailbox: str
) -> None:
    if mailbox.startswith(("crew://", "client://")):
        rt.hub.register_mailbox(mailbox)
    rt.hub.bind("billing").post("agent://fraud/checker", "private")
    with pytest.raises(ToolValidationError) as raised:
        tools.invoke("receive_message", {"wait_forever": True, "mailbox": mailbox})
    assert raised.value.field == "mailbox"
    assert "your own crew" in str(raised.value)
    # Nothing was consumed from the other crew's mailbox.
    assert outsider.invoke("receive_message", {"timeout_ms": 10})["message"]["payload"] == "private"


def test_an_unregistered_mailbox_is_a_typed_error(rt: ok.Runtime) -> None:
    tools = EventHubTools(rt.hub.bind("billing", "ghost"), register_own_mailbox=False)
    with pytest.raises(MailboxNotFoundError):
        tools.invoke("receive_message", {"timeout_ms": 10})
    result = tools.invoke("receive_message", {"timeout_ms": 10}, errors="result")
    assert result["error"] == {
        "type": "MailboxNotFoundError",
        "message": result["error"]["message"],
        "field": "mailbox",
    }


def test_a_mailbox_registered_by_its_owner_is_left_to_it(rt: ok.Runtime) -> None:
    registration = rt.hub.register_mailbox("agent://billing/owned")
    tools = EventHubTools(rt.hub.bind("billing", "owned"))
    rt.hub.bind("fraud").post("agent://billing/owned", 1)
    assert tools.close() == []
    assert registration.depth() == 1  # still registered, message still there
    assert [m.json() for m in registration.close()] == [1]


def test_close_unregisters_the_mailbox_it_registered_and_returns_what_was_left(rt: ok.Runtime) -> None:
    tools = EventHubTools(rt.hub.bind("billing", "temp"))
    sender = rt.hub.bind("fraud")
    sender.post("agent://billing/temp", 1)
    sender.post("agent://billing/temp", 2)
    assert [m.json() for m in tools.close()] == [1, 2]
    with pytest.raises(MailboxNotFoundError):
        sender.post("agent://billing/temp", 3)
    assert tools.close() == []


def test_a_crew_bound_client_reads_its_crew_mailbox(rt: ok.Runtime) -> None:
    with EventHubTools(rt.hub.bind("billing")) as crew_tools:
        assert str(crew_tools.own_mailbox) == "crew://billing"
        rt.hub.bind("fraud").post("crew://billing", "router")
        assert crew_tools.invoke("receive_message", {"timeout_ms": 10})["message"]["payload"] == "router"


def test_the_system_client_is_refused(rt: ok.Runtime) -> None:
    with pytest.raises(ok.errors.InvalidArgumentError):
        EventHubTools(rt.hub.system)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "timeout_ms"),
        ({"timeout_ms": None, "wait_forever": None}, "timeout_ms"),
        ({"timeout_ms": 1000, "wait_forever": True}, "wait_forever"),
        ({"wait_forever": False}, "wait_forever"),
        ({"timeout_ms": 1000, "wait_forever": False}, "wait_forever"),
        ({"timeout_ms": 0}, "timeout_ms"),
        ({"timeout_ms": -1}, "timeout_ms"),
        ({"timeout_ms": "10"}, "timeout_ms"),
        ({"wait_forever": "true"}, "wait_forever"),
        ({"timeout_ms": 10, "mailbox": "agent:/billing/x"}, "mailbox"),
        ({"timeout_ms": 10, "mailbox": 1}, "mailbox"),
        ({"timeout_ms": 10, "topic": "orders.*"}, "topic"),
    ],
)
def test_invalid_calls_are_refused_naming_the_field(
    rt: ok.Runtime, tools: EventHubTools, arguments: dict[str, Any], field: str
) -> None:
    result = tools.invoke("receive_message", arguments, errors="result")
    assert result["error"]["type"] == "ToolValidationError"
    assert result["error"]["field"] == field
    assert rt.hub.pending_waits()["on_mailbox"] == 0
