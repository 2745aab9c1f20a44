"""Spec §7: a reply to a sleeping requester wakes it and is its ``send_request`` result;
no reply in time wakes it with the timeout."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from orkeon_actors.crew import CrewStatus, call, respond
from orkeon_actors.lifecycle import LifecycleState
from orkeon_actors.tools import EventHubTools

from .conftest import Env
from .test_sleep_wake import _crew


def _requester(env: Env) -> None:
    env.factories["req"] = lambda _: _crew(
        call(
            "send_request",
            {"target_mailbox": "agent://billing/clerk", "payload": {"q": "total?"}, "timeout_ms": 60_000},
        ),
        respond("got it"),
    )


@pytest.fixture
def clerk(env: Env) -> Iterator[EventHubTools]:
    _requester(env)
    env.boot()
    tools = EventHubTools(env.hub.bind("billing", "clerk"))
    try:
        yield tools
    finally:
        tools.close()


def _send_result(env: Env, crew: str) -> dict[str, object]:

    conversation = env.snapshot(crew).agents[0].conversation
    data: dict[str, object] = json.loads([m for m in conversation if m.role == "tool"][-1].content)
    return data


def test_a_reply_wakes_the_sleeping_requester_and_is_its_tool_result(env: Env, clerk: EventHubTools) -> None:
    sup = env.sup
    assert sup is not None
    sup.spawn("req", "r1")
    assert env.settle("r1") is CrewStatus.WAITING
    assert sup.sleep("r1") is True
    [wait] = env.hub.load_pending_waits("r1")
    assert wait.correlation_id is not None and wait.expires_at is not None
    request = clerk.invoke("receive_message", {"wait_forever": True})["message"]
    assert request["payload"] == {"q": "total?"} and request["correlation_id"] == str(wait.correlation_id)
    assert sup.state("r1") is LifecycleState.ASLEEP
    clerk.invoke("reply_to", {"correlation_id": request["correlation_id"], "payload": {"total": 12.5}})
    assert env.settle("r1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    result = _send_result(env, "r1")
    assert result["timed_out"] is False and result["response_payload"] == {"total": 12.5}
    assert result["correlation_id"] == request["correlation_id"]
    assert sup.stats.wakes == 1 and sup.stats.expiries == 0


def test_an_unrelated_reply_does_not_wake_the_requester(env: Env, clerk: EventHubTools) -> None:
    other = EventHubTools(env.hub.bind("billing", "other"))
    try:
        sup = env.sup
        assert sup is not None
        sup.spawn("req", "r1")
        env.settle("r1")
        assert sup.sleep("r1") is True
        other_call = env.hub.bind("billing", "asker").request("agent://billing/other", "ping", 60)
        request = other.invoke("receive_message", {"wait_forever": True})["message"]
        assert request["correlation_id"] == str(other_call.correlation_id)
        other.invoke("reply_to", {"correlation_id": request["correlation_id"], "payload": "pong"})
        assert sup.state("r1") is LifecycleState.ASLEEP and sup.stats.wakes == 0
    finally:
        other.close()


def test_no_reply_in_time_wakes_the_requester_with_a_timeout(env: Env, clerk: EventHubTools) -> None:
    sup = env.sup
    assert sup is not None
    sup.spawn("req", "r1")
    env.settle("r1")
    assert sup.sleep("r1") is True
    env.clock.advance(59)
    assert sup.state("r1") is LifecycleState.ASLEEP
    env.clock.advance(2)
    assert env.settle("r1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    result = _send_result(env, "r1")
    assert result["timed_out"] is True and result["response_payload"] is None
    assert sup.stats.expiries == 1
