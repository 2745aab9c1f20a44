"""The seven agent tools (spec §5), their DTOs and JSON Schema export.

An LLM agent reaches the hub only through these tools::

    import orkeon_actors as ok

    tools = ok.tools.EventHubTools(rt.hub.bind("billing", "scorer"))
    definitions = tools.definitions()                    # give them to the model
    result = tools.invoke("wait_for_event", '{"topic": "orders.*", "timeout_ms": 60000}',
                          errors="result")               # a JSON-serialisable dict

See ``docs/tools.md`` for each tool's definition, examples, validation rules and the
semantics of a ``wait_for_event`` loop.
"""

from orkeon_actors.tools.converter import converter, structure_request, unstructure
from orkeon_actors.tools.definitions import TOOL_NAMES, TOOL_SPECS, ToolSpec, error_schema, tool_definitions
from orkeon_actors.tools.dto import (
    GetLastValueRequest,
    GetLastValueResponse,
    MessageEnvelope,
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
    ToolError,
    ToolErrorResult,
    WaitForEventRequest,
    WaitForEventResponse,
)
from orkeon_actors.tools.event_hub_tools import RESERVED_TOPIC_PREFIX, EventHubTools
from orkeon_actors.tools.schema import json_schema
from orkeon_actors.tools.styles import STYLES, DefinitionStyle, canonical_arguments, render
from orkeon_actors.tools.validation import GLOBAL_SCOPE, MAX_TIMEOUT_MS

__all__ = [
    "GLOBAL_SCOPE",
    "MAX_TIMEOUT_MS",
    "RESERVED_TOPIC_PREFIX",
    "STYLES",
    "TOOL_NAMES",
    "TOOL_SPECS",
    "DefinitionStyle",
    "EventHubTools",
    "GetLastValueRequest",
    "GetLastValueResponse",
    "MessageEnvelope",
    "PostMessageRequest",
    "PostMessageResponse",
    "PublishEventRequest",
    "PublishEventResponse",
    "ReceiveMessageRequest",
    "ReceiveMessageResponse",
    "ReplyToRequest",
    "ReplyToResponse",
    "SendRequestRequest",
    "SendRequestResponse",
    "ToolError",
    "ToolErrorResult",
    "ToolSpec",
    "WaitForEventRequest",
    "WaitForEventResponse",
    "canonical_arguments",
    "converter",
    "error_schema",
    "json_schema",
    "render",
    "structure_request",
    "tool_definitions",
    "unstructure",
]
