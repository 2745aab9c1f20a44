"""The agent events a crew emits (:mod:`orkeon_actors.model.agent_events`): each model
call and tool call started and finished, each answered task, recorded in the runtime's
journal (:class:`~orkeon_actors.crew.agent_io.AgentIO`).

The functions build plain-data values, so they are safe to call from the crew's
thread or the I/O loop's. Content (the prompt, the answer, tool arguments and results)
is filled only when the journal's ``capture_content`` is true.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import attrs

from orkeon_actors.crew.model import ModelRequest, ModelResponse, ToolCall
from orkeon_actors.errors import BudgetExhaustedError, CancelledError, ModelError
from orkeon_actors.model.agent_events import (
    AgentAnswered,
    AgentEventJournal,
    AgentFailed,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from orkeon_actors.model.clock import Clock

__all__ = [
    "Started",
    "agent_failed",
    "answered",
    "crew_scope",
    "failure_reason",
    "model_finished",
    "model_identity",
    "model_started",
    "tool_finished",
    "tool_started",
]


@attrs.frozen
class Started:
    """A call in progress: its event id, its start (wall and monotonic) and what the
    finished event repeats."""

    call_id: str
    started_at: datetime
    monotonic: float
    event: ModelCallStarted | ToolCallStarted

    @property
    def tool_name(self) -> str | None:
        """The tool's name, for a tool call (``None`` for a model call)."""
        return self.event.name if isinstance(self.event, ToolCallStarted) else None

    def started(self, call: ToolCall) -> bool:
        """Whether this is the start of the tool call ``call``."""
        return isinstance(self.event, ToolCallStarted) and self.event.tool_call_id == call.id


def model_identity(model: Any) -> tuple[str, str]:
    """``(model name, provider)`` of ``model``: its ``model`` and ``provider``
    attributes when they are strings, else its class's name for both."""
    name, provider = getattr(model, "model", None), getattr(model, "provider", None)
    fallback = type(model).__name__
    return (name if isinstance(name, str) else fallback, provider if isinstance(provider, str) else fallback)


def _content(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def model_started(journal: AgentEventJournal, clock: Clock, model: Any, request: ModelRequest) -> Started:
    """Record that the agent of ``request`` asked ``model``."""
    name, provider = model_identity(model)
    prompt = None
    if journal.capture_content:
        prompt = _content([attrs.asdict(message) for message in request.messages])
    event = ModelCallStarted(
        call_id=journal.next_call_id(),
        crew_id=request.crew_id,
        agent_id=request.agent_id,
        turn=request.turn,
        model=name,
        provider=provider,
        started_at=clock.now(),
        prompt=prompt,
    )
    journal.record(event)
    return Started(event.call_id, event.started_at, clock.monotonic(), event)


def model_finished(
    journal: AgentEventJournal, clock: Clock, started: Started, outcome: ModelResponse | BaseException
) -> None:
    """Record how the call ``started`` ended: ``outcome`` is its response or its error."""
    event = started.event
    assert isinstance(event, ModelCallStarted)
    common: dict[str, Any] = {
        "call_id": event.call_id,
        "crew_id": event.crew_id,
        "agent_id": event.agent_id,
        "turn": event.turn,
        "model": event.model,
        "provider": event.provider,
        "started_at": event.started_at,
        "duration_s": max(0.0, clock.monotonic() - started.monotonic),
    }
    if isinstance(outcome, BaseException):
        journal.record(ModelCallFinished(**common, error=_error_of(outcome)))
        return
    reasons = (outcome.finish_reason,) if outcome.finish_reason else ("tool_calls" if outcome.tool_calls else "stop",)
    journal.record(
        ModelCallFinished(
            **common,
            response_model=outcome.response_model or event.model,
            input_tokens=outcome.usage.input_tokens,
            output_tokens=outcome.usage.output_tokens,
            cost=outcome.usage.cost,
            finish_reasons=reasons,
            tool_calls=tuple(call.name for call in outcome.tool_calls),
            answer=outcome.text if journal.capture_content else None,
        )
    )


def tool_started(journal: AgentEventJournal, clock: Clock, crew_id: str, agent_id: str, call: ToolCall) -> Started:
    """Record that an agent called the tool ``call``."""
    event = ToolCallStarted(
        call_id=journal.next_call_id(),
        crew_id=crew_id,
        agent_id=agent_id,
        tool_call_id=call.id,
        name=call.name,
        started_at=clock.now(),
        arguments=call.arguments if journal.capture_content else None,
    )
    journal.record(event)
    return Started(event.call_id, event.started_at, clock.monotonic(), event)


def tool_finished(
    journal: AgentEventJournal,
    clock: Clock,
    started: Started,
    result: Mapping[str, Any],
    *,
    replayed: bool = False,
) -> None:
    """Record the ``result`` of the tool call ``started`` (an error result sets
    ``error`` to its ``error`` entry)."""
    event = started.event
    assert isinstance(event, ToolCallStarted)
    error = result.get("error")
    journal.record(
        ToolCallFinished(
            call_id=event.call_id,
            crew_id=event.crew_id,
            agent_id=event.agent_id,
            tool_call_id=event.tool_call_id,
            name=event.name,
            started_at=event.started_at,
            duration_s=max(0.0, clock.monotonic() - started.monotonic),
            error=None if error is None else _error_text(error),
            replayed=replayed,
            result=_content(result) if journal.capture_content else None,
        )
    )


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping) and "message" in error:
        return f"{error.get('type', 'Error')}: {error['message']}"
    return error if isinstance(error, str) else _content(error)


def answered(journal: AgentEventJournal, clock: Clock, crew_id: str, agent_id: str, text: str) -> None:
    """Record that an agent answered its task with ``text``."""
    journal.record(
        AgentAnswered(
            crew_id=crew_id, agent_id=agent_id, at=clock.now(), text=text if journal.capture_content else None
        )
    )


def failure_reason(
    journal: AgentEventJournal,
    crew_id: str,
    agent_id: str,
    exc: BaseException,
    *,
    deadline_passed: bool,
    tool: str | None,
) -> str:
    """Why ``exc`` ended the agent (:data:`~orkeon_actors.model.agent_events.FAILURE_REASONS`):
    by its type first (an exhausted budget is ``deadline`` when its wall-time deadline
    ``deadline_passed``), then ``tool_error`` while the ``tool`` call was in progress,
    ``model_error`` when it is what the agent's last model call failed with, else ``error``."""
    if isinstance(exc, BudgetExhaustedError):
        return "deadline" if deadline_passed else "budget_exhausted"
    if isinstance(exc, CancelledError | asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, ModelError):
        return "model_error"
    if tool is not None:
        return "tool_error"
    last = journal.last_of(crew_id, agent_id)
    if isinstance(last, ModelCallFinished) and last.error == _error_of(exc):
        return "model_error"
    return "error"


def agent_failed(
    journal: AgentEventJournal,
    clock: Clock,
    crew_id: str,
    agent_id: str,
    exc: BaseException,
    *,
    deadline_passed: bool = False,
    tool: str | None = None,
) -> None:
    """Record that an agent's task ended with ``exc`` (``tool``: the tool call in
    progress, if any; the reason is :func:`failure_reason`'s)."""
    reason = failure_reason(journal, crew_id, agent_id, exc, deadline_passed=deadline_passed, tool=tool)
    journal.record(
        AgentFailed(crew_id=crew_id, agent_id=agent_id, at=clock.now(), reason=reason, error=_error_of(exc), tool=tool)
    )


def _error_of(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def crew_scope(journal: AgentEventJournal, crew_id: str) -> AbstractContextManager[object]:
    """What a crew enters around an agent's step: the journal's
    :attr:`~orkeon_actors.model.agent_events.AgentEventJournal.crew_scope` for
    ``crew_id`` (the crew's trace context), or nothing when none is set."""
    scope = journal.crew_scope
    return contextlib.nullcontext() if scope is None else scope(crew_id)
