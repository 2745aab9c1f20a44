"""The agent step: an agent's loop as functions over its
:class:`~orkeon_actors.crew.state.AgentState` and its
:class:`~orkeon_actors.crew.model.Model` (Orkeon EventHub & Crew Lifecycle
specification, §8, §9.4).

Each transition is a pure function from a state to the next one (a task begins, the
model answered, a tool result came back, the task is answered, the agent failed);
:func:`run` drives them: ask the model, run the tool calls it made one by one, feed each
result back, until the model answers with text, a tool call parks the agent, or the
agent stops running. It knows nothing of actors or hubs: the crew actor gives it the
tool runner (which may park the agent on a hub wait), and a test can drive it with a
:class:`~orkeon_actors.crew.model.ScriptedModel` and a plain function.

Failure modes: :func:`run` raises what the model, a tool runner or the budget raise
(``BudgetExhaustedError`` once a limit is passed, ``OrchestrationError`` after
``max_turns`` model calls without an answer); the state it reached is on the slot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import attrs

from orkeon_actors.crew.agent import Agent
from orkeon_actors.crew.mode import PARKED, OrchestrationError
from orkeon_actors.crew.model import ChatMessage, ModelRequest, ModelResponse, ToolCall
from orkeon_actors.crew.state import AgentState, AgentStatus, BudgetSnapshot, TaskAssignment
from orkeon_actors.errors import BudgetExhaustedError, CancelledError, HubStoppedError, ToolValidationError
from orkeon_actors.model.cancel import Budget
from orkeon_actors.model.clock import Clock
from orkeon_actors.tools.waiting import error_result

__all__ = [
    "FATAL",
    "AgentSlot",
    "Answered",
    "after_response",
    "answered",
    "begin_task",
    "bounded",
    "budget_snapshot",
    "failed",
    "model_request",
    "run",
    "run_user_tool",
    "take_response",
    "with_tool_result",
]

FATAL: Final = (BudgetExhaustedError, CancelledError, HubStoppedError)
"""Errors that stop the agent whatever the tool: never turned into a tool result."""


@attrs.frozen
class Answered:
    """The model answered the task with ``text`` (no tool call)."""

    text: str


class AgentSlot(Protocol):
    """Where :func:`run` reads and writes one agent: its definition, its state (replaced
    at each transition) and its live budget."""

    agent: Agent
    state: AgentState
    budget: Budget


def budget_snapshot(state: AgentState, budget: Budget, clock: Clock) -> BudgetSnapshot:
    """``state``'s budget with what ``budget`` used so far (wall time on ``clock``)."""
    return attrs.evolve(
        state.budget,
        tokens_used=budget.tokens_used,
        tool_calls_used=budget.tool_calls_used,
        cost_used=budget.cost_used,
        wall_time_used=max(0.0, clock.monotonic() - budget.started_at),
        exhausted_reason=budget.reason,
    )


def begin_task(state: AgentState, agent: Agent, task: TaskAssignment) -> AgentState:
    """``state`` running ``task``: its prompt appended to the conversation (which opens
    with the agent's instructions if it is empty), the turn count reset."""
    conversation = state.conversation
    if not conversation and agent.instructions:
        conversation = (ChatMessage("system", agent.instructions),)
    return attrs.evolve(
        state,
        status=AgentStatus.RUNNING,
        task=task,
        conversation=(*conversation, ChatMessage("user", task.prompt)),
        turns=0,
    )


def bounded(conversation: tuple[ChatMessage, ...], keep: int | None) -> tuple[ChatMessage, ...]:
    """``conversation`` with at most ``keep`` messages after its opening (up to and
    including its first ``user`` message): the oldest go, and the kept part never starts
    with a ``tool`` result (its call went with the oldest). ``None`` keeps everything."""
    if keep is None or len(conversation) <= keep:
        return conversation
    opening = next((i + 1 for i, m in enumerate(conversation) if m.role == "user"), 0)
    if len(conversation) - opening <= keep:
        return conversation
    start = len(conversation) - keep
    while start < len(conversation) and conversation[start].role == "tool":
        start += 1
    return conversation[:opening] + conversation[start:]


def model_request(crew_id: str, agent: Agent, state: AgentState, tools: Sequence[Mapping[str, Any]]) -> ModelRequest:
    """What the model is asked at this turn."""
    return ModelRequest(
        crew_id,
        str(agent.agent_id),
        agent.role,
        agent.instructions,
        state.conversation,
        tuple(tools),
        state.turns,
    )


def after_response(state: AgentState, response: ModelResponse, budget: BudgetSnapshot) -> AgentState:
    """``state`` once the model answered ``response``: appended to the conversation,
    one more turn (its tool calls are queued once the budget allows them)."""
    return attrs.evolve(
        state,
        conversation=(*state.conversation, ChatMessage("assistant", response.text, response.tool_calls)),
        turns=state.turns + 1,
        budget=budget,
    )


def with_tool_result(state: AgentState, call: ToolCall, result: Mapping[str, Any]) -> AgentState:
    """``state`` with ``result`` (JSON data) appended as the answer of ``call``."""
    content = json.dumps(result, sort_keys=True, default=str)
    return attrs.evolve(
        state,
        conversation=(*state.conversation, ChatMessage("tool", content, tool_call_id=call.id, name=call.name)),
    )


def answered(state: AgentState, budget: BudgetSnapshot) -> AgentState:
    """``state`` once its task is answered: idle, no task."""
    return attrs.evolve(state, status=AgentStatus.IDLE, task=None, budget=budget)


def failed(state: AgentState, exc: BaseException, budget: BudgetSnapshot) -> AgentState:
    """``state`` failed with ``exc`` (an exhausted budget records why in the budget)."""
    if isinstance(exc, BudgetExhaustedError):
        budget = attrs.evolve(budget, exhausted_reason=str(exc))
    return attrs.evolve(state, status=AgentStatus.FAILED, failure=f"{type(exc).__name__}: {exc}", budget=budget)


def run_user_tool(fn: Callable[[Any], Any], call: ToolCall) -> dict[str, Any]:
    """Run a user tool on ``call``'s arguments: its result (a mapping, else
    ``{"result": value}``), or the error result the model reads (arguments that are not
    JSON, the tool's own exception). :data:`FATAL` errors propagate."""
    try:
        arguments = call.parsed_arguments()
    except ValueError as exc:
        return error_result(ToolValidationError(f"the arguments are not valid JSON: {exc}"), None)
    try:
        value = fn(arguments)
    except FATAL:
        raise
    except Exception as exc:  # a broken user tool is a result the model reads, not a crash
        return error_result(exc, getattr(exc, "field", None))
    return dict(value) if isinstance(value, Mapping) else {"result": value}


def take_response(slot: AgentSlot, response: ModelResponse, clock: Clock) -> Answered | None:
    """Charge ``response`` to ``slot``'s budget and append it to the conversation: an
    :class:`Answered` when it is text, else ``None`` with its tool calls queued. Raises
    ``BudgetExhaustedError`` once a limit is passed (the tokens still count)."""
    budget = slot.budget
    budget.consume(tokens=response.usage.total_tokens, cost=response.usage.cost)
    slot.state = after_response(slot.state, response, budget_snapshot(slot.state, budget, clock))
    budget.raise_if_exhausted()
    if not response.tool_calls:
        return Answered(response.text)
    slot.state = attrs.evolve(slot.state, queued_calls=response.tool_calls)
    return None


def run(
    slot: AgentSlot,
    *,
    crew_id: str,
    clock: Clock,
    tools: Callable[[], Sequence[Mapping[str, Any]]],
    run_tool: Callable[[ToolCall], Any],
    on_tool_result: Callable[[ToolCall, Mapping[str, Any]], None],
    ask: Callable[[ModelRequest], Any] | None = None,
    response: ModelResponse | None = None,
    hold: Callable[[], bool] | None = None,
) -> Answered | Any | None:
    """Drive ``slot`` while it is running: an :class:`Answered` once the model answers
    with text, ``PARKED`` once ``run_tool`` parked the agent or ``ask`` started a model
    call that answers later, ``None`` if something else stopped it (a tool call that
    cancelled it). ``tools()`` gives the tool definitions of each model call;
    ``on_tool_result`` sees each result once it is in the conversation. ``ask`` asks the
    model (default: the agent's model's ``complete``, inline); ``response``: the answer
    of a call that parked the agent, taken first. ``hold``: asked once the model
    answered with tool calls, before they run; ``True`` parks the agent (``PARKED``) with
    them queued (its crew runs them later)."""
    agent, budget = slot.agent, slot.budget
    ask_model: Callable[[ModelRequest], Any] = agent.model.complete if ask is None else ask
    if response is not None:
        outcome = take_response(slot, response, clock)
        if outcome is not None:
            return outcome
        if hold is not None and hold():
            return PARKED
    while slot.state.status is AgentStatus.RUNNING:
        budget.raise_if_exhausted()
        if slot.state.queued_calls:
            call, *rest = slot.state.queued_calls
            slot.state = attrs.evolve(slot.state, queued_calls=tuple(rest))
            budget.consume(tool_calls=1)
            budget.raise_if_exhausted()
            result = run_tool(call)
            if result is PARKED:
                return PARKED
            slot.state = with_tool_result(slot.state, call, result)
            on_tool_result(call, result)
            continue
        if slot.state.turns >= agent.max_turns:
            raise OrchestrationError(
                f"agent {agent.agent_id} made {agent.max_turns} model calls without answering its task "
                "(max_turns); end its script with a text answer or raise max_turns"
            )
        if agent.max_conversation is not None:
            slot.state = attrs.evolve(slot.state, conversation=bounded(slot.state.conversation, agent.max_conversation))
        answer = ask_model(model_request(crew_id, agent, slot.state, tools()))
        if answer is PARKED:
            return PARKED
        outcome = take_response(slot, answer, clock)
        if outcome is not None:
            return outcome
        if hold is not None and hold():
            return PARKED
    return None
