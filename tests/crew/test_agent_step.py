"""The agent step without an actor: :func:`orkeon_actors.crew.agent_step.run` drives an
agent's state with its model and a plain tool runner."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import pytest

from orkeon_actors.crew import (
    Agent,
    AgentState,
    AgentStatus,
    BudgetLimits,
    ScriptedModel,
    TaskAssignment,
    agent_step,
    call,
    respond,
)
from orkeon_actors.crew.agent_runtime import make_budget
from orkeon_actors.crew.mode import PARKED, OrchestrationError
from orkeon_actors.crew.model import ChatMessage, ToolCall
from orkeon_actors.errors import BudgetExhaustedError
from orkeon_actors.model.cancel import Budget
from orkeon_actors.model.clock import VirtualClock


@attrs.define
class Slot:
    agent: Agent
    state: AgentState
    budget: Budget


def _slot(agent: Agent, clock: VirtualClock) -> Slot:
    state = AgentState(agent.agent_id, agent.role, budget=agent.budget.snapshot())
    state = agent_step.begin_task(state, agent, TaskAssignment("t", "add 2 and 3", "orchestration"))
    return Slot(agent, state, make_budget(agent.budget, clock))


def _run(slot: Slot, clock: VirtualClock, run_tool: Any) -> tuple[Any, list[str]]:
    seen: list[str] = []

    def on_result(c: ToolCall, result: Mapping[str, Any]) -> None:
        seen.append(f"{c.name}:{json.dumps(result, sort_keys=True)}")

    outcome = agent_step.run(
        slot, crew_id="c", clock=clock, tools=lambda: [], run_tool=run_tool, on_tool_result=on_result
    )
    return outcome, seen


def test_a_tool_call_result_is_fed_back_and_the_text_answer_ends_the_task() -> None:
    clock = VirtualClock()
    agent = Agent("a", ScriptedModel([call("add", {"x": 2, "y": 3}), "5"]), instructions="be exact")
    slot = _slot(agent, clock)
    outcome, seen = _run(slot, clock, lambda c: {"sum": c.parsed_arguments()["x"] + c.parsed_arguments()["y"]})
    assert outcome == agent_step.Answered("5")
    assert seen == ['add:{"sum": 5}']
    roles = [m.role for m in slot.state.conversation]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert slot.state.turns == 2
    assert slot.state.budget.tool_calls_used == 1


def test_a_parking_tool_stops_the_loop_with_its_call_consumed() -> None:
    clock = VirtualClock()
    agent = Agent("a", ScriptedModel([call("wait_for_event", {"topic": "x", "wait_forever": True}), "never"]))
    slot = _slot(agent, clock)
    outcome, seen = _run(slot, clock, lambda c: PARKED)
    assert outcome is PARKED
    assert seen == []
    assert slot.state.queued_calls == ()


def test_max_turns_without_an_answer_raises_with_the_state_kept() -> None:
    clock = VirtualClock()
    agent = Agent("a", ScriptedModel(policy=lambda r: call("noop")), max_turns=3)
    slot = _slot(agent, clock)
    with pytest.raises(OrchestrationError, match="max_turns"):
        _run(slot, clock, lambda c: {"ok": True})
    assert slot.state.turns == 3


def test_an_exhausted_budget_raises_and_failed_records_why() -> None:
    clock = VirtualClock()
    agent = Agent("a", ScriptedModel(policy=lambda r: call("noop")), budget=BudgetLimits(max_tool_calls=2))
    slot = _slot(agent, clock)
    with pytest.raises(BudgetExhaustedError) as caught:
        _run(slot, clock, lambda c: {"ok": True})
    state = agent_step.failed(slot.state, caught.value, agent_step.budget_snapshot(slot.state, slot.budget, clock))
    assert state.status is AgentStatus.FAILED
    assert state.failure is not None and state.failure.startswith("BudgetExhaustedError")
    assert state.budget.exhausted_reason == str(caught.value)


def test_a_broken_user_tool_is_an_error_result_not_a_crash() -> None:
    def broken(arguments: Mapping[str, Any]) -> Any:
        raise KeyError("no such row")

    result = agent_step.run_user_tool(broken, ToolCall("1", "lookup", "{}"))
    assert result["error"]["type"] == "KeyError"
    assert "no such row" in result["error"]["message"]


def test_max_conversation_keeps_the_opening_and_the_last_messages_each_model_call() -> None:
    clock = VirtualClock()
    lengths: list[int] = []

    def policy(request: Any) -> Any:
        lengths.append(len(request.messages))
        return call("noop") if len(lengths) < 20 else respond("done")

    agent = Agent("a", ScriptedModel(policy=policy), instructions="loop", max_turns=100, max_conversation=5)
    slot = _slot(agent, clock)
    outcome, _ = _run(slot, clock, lambda c: {"ok": True})
    assert outcome == agent_step.Answered("done")
    # system + task prompt, then at most 5 more: never a tool result without its call
    assert max(lengths) == 2 + 4 and lengths[:3] == [2, 4, 6]
    kept = slot.state.conversation
    assert [m.role for m in kept[:3]] == ["system", "user", "assistant"]
    assert kept[1].content == "add 2 and 3"


def test_without_max_conversation_everything_is_kept() -> None:
    conversation = tuple(ChatMessage("tool" if i % 2 else "assistant", str(i)) for i in range(9))
    assert agent_step.bounded(conversation, None) == conversation
    opening = (ChatMessage("user", "task"),)
    assert agent_step.bounded(opening + conversation, 3) == opening + conversation[-3:]
    assert agent_step.bounded(opening + conversation, 2) == opening + conversation[-1:]  # not from a tool result


@pytest.mark.parametrize("keep", [0, 1, True, 2.5])
def test_max_conversation_below_a_call_and_its_result_is_refused(keep: Any) -> None:
    with pytest.raises(ValueError, match="max_conversation must be None or an int of at least 2"):
        Agent("a", ScriptedModel(["x"]), max_conversation=keep)
