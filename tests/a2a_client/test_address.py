"""Posting to ``a2a://NAME`` (the hub-side bridge), and the address and link grammar
(issue #33, "Calling A2A agents from a crew")."""

from __future__ import annotations

import json
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.a2a.client import RemoteAgent, remote_agents
from orkeon_actors.acl import AclConfigError, AclRegistry, CrewLink, parse_links, validate_crew_name
from orkeon_actors.crew import (
    Agent,
    CrewActor,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    call,
    respond,
    start_crew,
    wait_finished,
)
from orkeon_actors.errors import EventAclError, InvalidArgumentError, InvalidMailboxAddressError
from orkeon_actors.model.address import Scheme
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until
from tests.a2a_client.conftest import Setup

WEATHER = [CrewLink.a2a("weather", "bidirectional")]


def _agent_mailbox(setup: Setup, crew: str, links: list[CrewLink] | None) -> tuple[Any, Any]:
    """A crew registered with the ACL, and its agent's client and mailbox reader."""
    crew_id = setup.registry.register_crew(crew, links=links)
    client = setup.rt.hub.bind(crew_id, "a")
    registration = setup.rt.hub.register_mailbox(ok.MailboxAddress.agent(crew_id, "a"))
    return client, registration


def _next(client: Any, timeout: float = 10) -> ok.Message:
    return client.wait_for(ok.WaitOnMailbox(ok.MailboxAddress.agent(client.crew_id, "a")), timeout)


def test_the_address_parses_and_round_trips() -> None:
    address = ok.MailboxAddress.parse("a2a://weather")
    assert address.scheme is Scheme.A2A and address.name == "weather" and str(address) == "a2a://weather"
    assert address.target_crew_id is None
    with pytest.raises(InvalidMailboxAddressError, match="A2A agent name"):
        ok.MailboxAddress.parse("a2a://-bad")
    with pytest.raises(InvalidMailboxAddressError, match="extra path segment"):
        ok.MailboxAddress.parse("a2a://weather/x")


def test_links_name_an_a2a_agent_either_way_and_crews_cannot_take_the_prefix() -> None:
    block = parse_links(
        [{"to": "a2a://weather", "direction": "bidirectional"}, {"to": "a2a:maps", "direction": "outbound"}]
    )
    assert [link.to for link in block.links] == ["a2a:weather", "a2a:maps"]
    assert all(link.is_a2a for link in block.links) and not block.warnings
    with pytest.raises(AclConfigError, match="reserved for external A2A agents"):
        validate_crew_name("a2a:weather")
    assert parse_links([{"to": "a2a:", "direction": "outbound"}]).links == ()  # discarded with a warning


def test_the_configuration_is_checked() -> None:
    assert remote_agents({"weather": "http://h:1"}) == {"weather": RemoteAgent("weather", "http://h:1")}
    assert remote_agents({"w": {"url": "http://h:1", "timeout": 5}})["w"].timeout == 5
    for bad, match in [
        ({"weather": "ftp://h"}, "http"),
        ({"weather": {"url": "http://h:1", "timeout": 0}}, "positive, finite"),
        ({"weather": {"url": "http://h:1", "timout": 5}}, "may have timeout"),
        ({"bad name": "http://h:1"}, "A2A agent name"),
        ({"weather": RemoteAgent("maps", "http://h:1")}, "must agree"),
    ]:
        with pytest.raises(InvalidArgumentError, match=match):
            remote_agents(bad)


def test_a_crew_posts_to_the_address_and_receives_the_answer(setup: Setup) -> None:
    """An agent posts to a2a://weather with post_message and reads the answer with
    receive_message: it arrives as from the agent's peer id, with its metadata."""

    def steps(request: ModelRequest) -> ModelResponse:
        if request.turn == 0:
            return call("post_message", {"target_mailbox": "a2a://weather", "payload": "hello Lyon"})
        last = request.last_tool_result()
        if request.turn == 1 or "a2a_state" not in last["message"]["metadata"]:  # events first, then the outcome
            return call("receive_message", {"timeout_ms": 10_000})
        return respond(json.dumps(last["message"]))

    agent = Agent("planner", ScriptedModel(policy=steps))
    ref = CrewActor.start(
        setup.rt.hub,
        name="poster-crew",
        agents=[agent],
        orchestration=Sequential([Task("plan", "planner")]),
        links=WEATHER,
        acl=setup.registry,
    )
    try:
        start_crew(ref)
        received = json.loads(wait_finished(ref, timeout=30).result or "{}")
    finally:
        ref.stop()
    assert received["payload"]["answer"] == "hi: hello Lyon"
    assert received["metadata"]["a2a_state"] == "completed" and received["metadata"]["a2a_agent"] == "weather"
    assert setup.registry.name_of(received["source_crew_id"]) == "a2a:weather"


def test_streamed_events_then_the_outcome_arrive_as_posts(setup: Setup) -> None:
    client, _ = _agent_mailbox(setup, "stream-poster", WEATHER)
    client.post("a2a://weather", "stream")
    messages = [_next(client) for _ in range(6)]
    kinds = [(m.metadata.get("a2a_event"), m.metadata.get("a2a_state")) for m in messages]
    assert kinds == [("status", None)] * 2 + [("artifact", None)] * 2 + [("status", None), (None, "completed")]
    assert [m.json()["text"] for m in messages[:4]] == ["step 1", "step 2", "part A", " part B"]
    assert messages[-1].json()["answer"] == "part A part B"


def test_input_required_over_the_address(setup: Setup) -> None:
    client, _ = _agent_mailbox(setup, "ask-poster", WEATHER)
    client.post("a2a://weather", "ask")
    question = _next(client)
    while "a2a_state" not in question.metadata:  # the input-required status event first
        question = _next(client)
    assert question.metadata["a2a_state"] == "input-required" and question.json()["question"] == "which city?"
    task_id = question.metadata["a2a_task_id"]
    client.post("a2a://weather", {"message": "Nice", "task_id": task_id})
    answer = _next(client)
    while "a2a_state" not in answer.metadata:
        answer = _next(client)
    assert answer.json()["answer"] == "forecast for Nice" and answer.metadata["a2a_task_id"] == task_id


def test_a_request_to_the_address_is_answered_by_the_reply(setup: Setup) -> None:
    client, _ = _agent_mailbox(setup, "asker", WEATHER)
    reply = client.send("a2a://weather", "hello Bonn", timeout=10)
    assert reply.json()["answer"] == "hi: hello Bonn" and reply.metadata["a2a_state"] == "completed"


def test_a_remote_failure_over_the_address_is_an_error_outcome(setup: Setup) -> None:
    client, _ = _agent_mailbox(setup, "fail-poster", WEATHER)
    client.post("a2a://weather", "fail")
    outcome = _next(client)
    while "a2a_state" not in outcome.metadata:
        outcome = _next(client)
    assert outcome.metadata["a2a_state"] == "error"
    assert outcome.json()["error"]["type"] == "RemoteAgentFailedError"


def test_the_acl_refuses_an_unlinked_post_and_drops_an_answer_with_no_way_back(setup: Setup) -> None:
    assert setup.rt.a2a_agents is not None
    received = setup.remote.executor.received
    unlinked, _ = _agent_mailbox(setup, "unlinked-poster", None)
    with pytest.raises(EventAclError) as refused:
        unlinked.post("a2a://weather", "hello")
    assert refused.value.rule == "a2a-unlinked"
    assert setup.remote.executor.received == received  # nothing left the runtime

    outbound, registration = _agent_mailbox(setup, "outbound-poster", [CrewLink.a2a("weather", "outbound")])
    outbound.post("a2a://weather", "hello Oslo")  # the call goes out ...
    bridge = setup.rt.a2a_agents.bridge
    wait_until(lambda: len(bridge.refusals) >= 1, what="the answer refused")
    assert bridge.refusals[-1].rule == "a2a-unlinked"  # ... its answer is checked as inbound traffic
    assert "outbound only: make it bidirectional" in str(bridge.refusals[-1])
    assert registration.close() == []  # the agent got nothing


def test_without_an_acl_stage_every_crew_may_call(setup: Setup) -> None:
    with ok.Runtime.start(a2a_agents={"weather": setup.remote.url}) as rt:
        client = rt.hub.bind(AclRegistry().register_crew("free"), "a")
        assert client.send("a2a://weather", "hello Rome", timeout=10).json()["answer"] == "hi: hello Rome"
