"""Crews on the real adapters: tools, budgets, failures, and a sleep across a restart."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from orkeon_actors.crew import Agent, BudgetLimits, CrewStatus, Model, query_crew
from orkeon_actors.lifecycle import CrewBlueprint
from orkeon_actors.models import AnthropicModel, OpenAIChatModel, RetryPolicy
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until
from tests.crew.conftest import Crews, crews  # noqa: F401 - the fixture
from tests.lifecycle.conftest import Env, env  # noqa: F401 - the fixture

from .fake_provider import FakeProvider, Received, Reply, Sleeps, Step, anthropic_script, openai_script


def _openai(provider: FakeProvider, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-test", base_url=f"{provider.url}/v1", retry=RetryPolicy(max_retries=1, sleep=Sleeps()), **options
    )


def _anthropic(provider: FakeProvider, **options: Any) -> AnthropicModel:
    return AnthropicModel(
        "claude-test", api_key="k", base_url=provider.url, retry=RetryPolicy(max_retries=1, sleep=Sleeps()), **options
    )


ADAPTERS: dict[str, tuple[Callable[..., Model], Callable[..., Callable[[Received], Reply]]]] = {
    "openai": (_openai, openai_script),
    "anthropic": (_anthropic, anthropic_script),
}


def _one(agent: Agent) -> Sequential:
    return Sequential([Task("go", agent.agent_id)])


@pytest.mark.parametrize("name", ADAPTERS)
def test_parallel_tool_calls_run_and_their_results_go_back_with_their_ids(
    crews: Crews,  # noqa: F811
    provider: FakeProvider,
    name: str,
) -> None:
    adapter, script = ADAPTERS[name]
    provider.handler = script(
        Step(
            "Announcing, then reading the value back.",
            (
                ("publish_event", {"topic": "news.today", "payload": {"n": 1}, "retain_as_last_value": True,
                                   "last_value_key": "latest"}),
                ("get_last_value", {"key": "latest", "crew_scope": "_global"}),
            ),
            input_tokens=40,
            output_tokens=12,
        ),
        Step("done", input_tokens=60, output_tokens=3),
    )  # fmt: skip
    agent = Agent("a", adapter(provider, price={"input": 1.0, "output": 2.0}), instructions="You announce news.")
    ref = crews.start(agents=[agent], orchestration=_one(agent), crew_id="c1")
    assert crews.settle(ref, CrewStatus.COMPLETED, CrewStatus.FAILED) is CrewStatus.COMPLETED
    assert query_crew(ref, "summary")[1] == "done"
    first, second = provider.requests
    tool_results = _tool_results(name, second.body)
    ids = ["call_0_0", "call_0_1"] if name == "openai" else ["toolu_0_0", "toolu_0_1"]
    assert [call_id for call_id, _ in tool_results] == ids
    assert tool_results[1][1]["found"] is True and tool_results[1][1]["value"] == {"n": 1}
    budget = query_crew(ref, "snapshot").agents[0].budget
    assert budget.tokens_used == 40 + 12 + 60 + 3
    assert budget.cost_used == pytest.approx((100 * 1.0 + 15 * 2.0) / 1e6)
    assert first.body["tools"] and len(first.body["tools"]) == 7


def _tool_results(name: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    if name == "openai":
        return [(m["tool_call_id"], json.loads(m["content"])) for m in body["messages"] if m["role"] == "tool"]
    return [
        (b["tool_use_id"], json.loads(b["content"]))
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_refused_request_fails_the_crew_with_the_reason(
    crews: Crews,  # noqa: F811
    provider: FakeProvider,
    name: str,
) -> None:
    adapter, _ = ADAPTERS[name]
    provider.replies = [Reply(401, {"error": {"type": "authentication_error", "message": "invalid x-api-key"}})]
    agent = Agent("a", adapter(provider))
    ref = crews.start(agents=[agent], orchestration=_one(agent))
    crews.settle(ref, CrewStatus.FAILED)
    failure = query_crew(ref, "summary")[2]
    assert failure.error_type == "ModelError" and failure.agent_id == "a"
    assert "HTTP 401 authentication_error: invalid x-api-key" in failure.message and "not retried" in failure.message


@pytest.mark.parametrize("name", ADAPTERS)
def test_usage_exhausts_the_token_budget(crews: Crews, provider: FakeProvider, name: str) -> None:  # noqa: F811
    adapter, script = ADAPTERS[name]
    provider.handler = script(Step("", (("get_last_value", {"key": "k"}),), input_tokens=900, output_tokens=200))
    agent = Agent("a", adapter(provider), budget=BudgetLimits(max_tokens=1000))
    ref = crews.start(agents=[agent], orchestration=_one(agent))
    crews.settle(ref, CrewStatus.FAILED)
    failure = query_crew(ref, "summary")[2]
    assert failure.error_type == "BudgetExhaustedError" and "token budget" in failure.message
    assert len(provider.requests) == 1


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_crew_asleep_mid_conversation_wakes_after_a_restart_and_sends_the_same_history(
    env: Env,  # noqa: F811
    provider: FakeProvider,
    name: str,
) -> None:
    adapter, script = ADAPTERS[name]
    provider.handler = script(
        Step("Waiting for the order.", (("receive_message", {"wait_forever": True}),)),
        Step("Order 7 received."),
    )

    def blueprint(_: object) -> CrewBlueprint:
        agent = Agent("a", adapter(provider), instructions="You take orders.")
        return CrewBlueprint(agents=[agent], orchestration=_one(agent))

    env.factories["orders"] = blueprint
    sup = env.boot()
    sup.spawn("orders", "c1")
    assert env.settle("c1") is CrewStatus.WAITING
    assert sup.sleep("c1") is True
    sup = env.restart()  # a new runtime on the same store: the crew is only a snapshot now
    env.hub.bind("shop", "x").post("agent://c1/a", {"order": 7})
    assert env.settle("c1", CrewStatus.COMPLETED, CrewStatus.FAILED) is CrewStatus.COMPLETED
    wait_until(lambda: len(provider.requests) == 2, what="the second model call")
    before, after = (r.body for r in provider.requests)
    answered = _history_after_first_turn(name, before, after)
    assert answered["tool_call_ids"] == (["call_0_0"] if name == "openai" else ["toolu_0_0"])
    assert answered["text"] == "Waiting for the order."
    assert answered["result"]["timed_out"] is False and answered["result"]["message"]["payload"] == {"order": 7}
    assert env.summary("c1")[1] == "Order 7 received."


def _history_after_first_turn(name: str, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Check the second request repeats the first one's history exactly, then holds the
    model's first turn as it produced it and the tool's result for its call id."""
    messages = after["messages"]
    if name == "openai":
        assert messages[: len(before["messages"])] == before["messages"]
        assistant, tool = messages[len(before["messages"]) :]
        assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
        assert assistant["tool_calls"][0]["function"] == {
            "name": "receive_message",
            "arguments": '{"wait_forever": true}',
        }
        return {
            "tool_call_ids": [c["id"] for c in assistant["tool_calls"]],
            "text": assistant["content"],
            "result": json.loads(tool["content"]),
        }
    assert after["system"] == before["system"] == "You take orders."
    assert messages[: len(before["messages"])] == before["messages"]
    assistant, results = messages[len(before["messages"]) :]
    [text, use] = assistant["content"]
    [result] = results["content"]
    assert use == {"type": "tool_use", "id": use["id"], "name": "receive_message", "input": {"wait_forever": True}}
    assert result["tool_use_id"] == use["id"]
    return {"tool_call_ids": [use["id"]], "text": text["text"], "result": json.loads(result["content"])}
