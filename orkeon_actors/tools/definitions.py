"""The seven tool definitions: name, a description written for a model, JSON Schemas.

:data:`TOOL_SPECS` is the catalogue (in the order of spec §5); :func:`tool_definitions`
renders it in the shape an LLM API or MCP expects, one of the styles of
:mod:`orkeon_actors.tools.styles`: ``"anthropic"`` (the default, ``{"name",
"description", "input_schema"}``), ``"openai"``, ``"openai-strict"``, ``"gemini"`` and
``"mcp"`` (which also carries each tool's ``outputSchema``).

Schemas are JSON Schema Draft 2020-12, generated from the DTOs
(:mod:`orkeon_actors.tools.schema`), self-contained and without ``$schema``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Final, Literal

import attrs

from orkeon_actors.tools.dto import (
    GetLastValueRequest,
    GetLastValueResponse,
    PostMessageRequest,
    PostMessageResponse,
    PublishEventRequest,
    PublishEventResponse,
    ReceiveMessageRequest,
    ReceiveMessageResponse,
    ReplyToRequest,
    ReplyToResponse,
    SendRequestRequest,
    SendRequestResponse,
    ToolErrorResult,
    WaitForEventRequest,
    WaitForEventResponse,
)
from orkeon_actors.tools.schema import json_schema
from orkeon_actors.tools.styles import DefinitionStyle, render
from orkeon_actors.tools.validation import GLOBAL_SCOPE

__all__ = [
    "TOOL_NAMES",
    "TOOL_SPECS",
    "DefinitionStyle",
    "ToolName",
    "ToolSpec",
    "canonical_definition",
    "error_schema",
    "tool_definitions",
]

ToolName = Literal[
    "publish_event",
    "post_message",
    "send_request",
    "reply_to",
    "receive_message",
    "wait_for_event",
    "get_last_value",
]


@attrs.frozen
class ToolSpec:
    """One tool: its name, the description a model reads, its request and response DTOs."""

    name: str
    description: str
    request: type
    response: type

    @functools.cached_property
    def input_schema(self) -> dict[str, Any]:
        return json_schema(self.request)

    @functools.cached_property
    def output_schema(self) -> dict[str, Any]:
        return json_schema(self.response)


_ERRORS = ' A refused call returns {"error": {"type", "message", "field"}}: fix the named field and call again.'

TOOL_SPECS: Final[tuple[ToolSpec, ...]] = (
    ToolSpec(
        "publish_event",
        "Broadcast an event on a topic to every current subscriber (fire-and-forget, no reply). "
        "Use it to announce facts others may react to, e.g. topic 'orders.created'. Set "
        "target_crew_id to reach a single crew only. With retain_as_last_value and last_value_key "
        "the event is also kept as the latest value of that key, readable with get_last_value. "
        "Returns event_id and published_at. Topics starting with '_system.' are reserved." + _ERRORS,
        PublishEventRequest,
        PublishEventResponse,
    ),
    ToolSpec(
        "post_message",
        "Send a message to one mailbox without waiting for an answer, e.g. target_mailbox "
        "'agent://billing/scorer'. The recipient reads it with receive_message. Fails if no such "
        "mailbox exists. Returns message_id and posted_at. To get an answer back, use send_request "
        "instead." + _ERRORS,
        PostMessageRequest,
        PostMessageResponse,
    ),
    ToolSpec(
        "send_request",
        "Send a request to one mailbox and wait for its reply, at most timeout_ms milliseconds "
        "(required; requests cannot wait forever). Returns {correlation_id, timed_out: false, "
        "response_payload} with the reply's body, or {correlation_id, timed_out: true, "
        "response_payload: null} when no reply came in time." + _ERRORS,
        SendRequestRequest,
        SendRequestResponse,
    ),
    ToolSpec(
        "reply_to",
        "Answer a request you received: a message whose topic is '_system.send' carries a "
        "correlation_id; pass it here with your answer as payload. Each request is answered once: "
        "an unknown, already answered or expired correlation_id is refused. Returns replied_at." + _ERRORS,
        ReplyToRequest,
        ReplyToResponse,
    ),
    ToolSpec(
        "receive_message",
        "Take the oldest message from your mailbox (or another mailbox of your crew), waiting for "
        "one if it is empty. Give exactly one of timeout_ms or wait_forever: true. Returns "
        "{timed_out: false, message} (the message is removed from the mailbox) or {timed_out: true, "
        "metadata} when nothing arrived in time. If message.correlation_id is set, the sender "
        "awaits an answer: use reply_to." + _ERRORS,
        ReceiveMessageRequest,
        ReceiveMessageResponse,
    ),
    ToolSpec(
        "wait_for_event",
        "Wait for the next event published on a topic pattern ('*' = one word, '#' = any number "
        "of words), optionally only events whose metadata matches metadata_match. Give exactly one "
        "of timeout_ms or wait_forever: true. Returns {timed_out: false, message} or "
        "{timed_out: true, metadata}. To follow a topic, call it in a loop with the same topic: "
        "events published while you were busy between two calls are kept for you and returned by "
        "the next calls, in order, each once. The first call only sees events published after it "
        "started." + _ERRORS,
        WaitForEventRequest,
        WaitForEventResponse,
    ),
    ToolSpec(
        "get_last_value",
        "Read the latest value retained under a key by publish_event (retain_as_last_value). "
        "crew_scope defaults to your own crew's slot; use '" + GLOBAL_SCOPE + "' for values "
        "published without target_crew_id. Returns {found, value, set_at}: found is false when "
        "nothing was retained (value and set_at are then null); found is true with value null "
        "when null itself was retained." + _ERRORS,
        GetLastValueRequest,
        GetLastValueResponse,
    ),
)

TOOL_NAMES: Final[tuple[str, ...]] = tuple(spec.name for spec in TOOL_SPECS)

_SPECS_BY_NAME: Final[dict[str, ToolSpec]] = {spec.name: spec for spec in TOOL_SPECS}


def spec_for(name: str) -> ToolSpec | None:
    """The spec of the tool called ``name``, or ``None``."""
    return _SPECS_BY_NAME.get(name)


@functools.cache
def error_schema() -> dict[str, Any]:
    """Schema of the ``{"error": {...}}`` result of a refused call."""
    return json_schema(ToolErrorResult)


def canonical_definition(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as a canonical definition (see :mod:`orkeon_actors.tools.styles`)."""
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "output_schema": spec.output_schema,
    }


def tool_definitions(style: DefinitionStyle = "anthropic") -> list[dict[str, Any]]:
    """The seven definitions in ``style``, freshly copied (callers may mutate them).

    Every model call of an agent with hub tools asks for them, so each style is rendered
    once (to JSON text) and each call decodes a fresh copy from it: about three times
    cheaper than a deep copy of the rendered structures, and equal to it.

    Raises ``ValueError`` for an unknown ``style``.
    """
    rendered: list[dict[str, Any]] = json.loads(_rendered_json(style))
    return rendered


@functools.cache
def _rendered_json(style: DefinitionStyle) -> str:
    return json.dumps([render(canonical_definition(spec), style) for spec in TOOL_SPECS])
