"""The agent events' JSON: how a model call or a tool call appears to observers outside
the process (the Studio's agent lanes, ``orkeon crew run --json``, a stored history).

Datetime rule: RFC 3339 in UTC with microseconds and a ``Z`` (the tool format's rule,
:data:`~orkeon_actors.wire.tool_json.TOOL_DATETIMES`); reading requires an offset.

An event is a JSON object of its fields (snake_case, as the classes in
:mod:`orkeon_actors.model.agent_events` name them, tuples as arrays) plus ``"kind"``,
its tag: ``model_call_started``, ``model_call_finished``, ``tool_call_started``,
``tool_call_finished``, ``agent_answered`` or ``agent_failed``. :func:`decode_agent_event` is the inverse
of :func:`encode_agent_event` and raises ``InvalidArgumentError`` naming what is wrong
for an object that is not one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import cattrs

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.agent_events import (
    AgentAnswered,
    AgentEvent,
    AgentFailed,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from orkeon_actors.wire.base import base_converter
from orkeon_actors.wire.tool_json import TOOL_DATETIMES

__all__ = ["AGENT_EVENT_KINDS", "decode_agent_event", "encode_agent_event"]

AGENT_EVENT_KINDS: Final[Mapping[str, type[AgentEvent]]] = {
    "model_call_started": ModelCallStarted,
    "model_call_finished": ModelCallFinished,
    "tool_call_started": ToolCallStarted,
    "tool_call_finished": ToolCallFinished,
    "agent_answered": AgentAnswered,
    "agent_failed": AgentFailed,
}
"""Each event class under its ``kind`` tag."""

_KIND_OF: Final = {cls: kind for kind, cls in AGENT_EVENT_KINDS.items()}
_converter: Final = base_converter(TOOL_DATETIMES)


def encode_agent_event(event: AgentEvent) -> dict[str, Any]:
    """``event`` as a JSON-ready object with its ``kind`` (module docstring)."""
    fields: dict[str, Any] = _converter.unstructure(event)
    fields["kind"] = _KIND_OF[type(event)]
    return fields


def decode_agent_event(value: object) -> AgentEvent:
    """The event ``value`` encodes; ``InvalidArgumentError`` when it encodes none."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"an agent event is a JSON object, not {type(value).__name__}")
    kind = value.get("kind")
    cls = AGENT_EVENT_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InvalidArgumentError(f"unknown agent event kind {kind!r}; expected one of {', '.join(AGENT_EVENT_KINDS)}")
    fields = {k: v for k, v in value.items() if k != "kind"}
    try:
        event: AgentEvent = _converter.structure(fields, cls)
    except (cattrs.BaseValidationError, TypeError, ValueError) as error:
        raise InvalidArgumentError(f"not a valid {kind} event: {error}") from error
    return event
