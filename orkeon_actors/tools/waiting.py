"""The waiting tools' rules, once: decoding a call's arguments, validation of a
``receive_message`` / ``send_request`` call and the result a model reads from a
``wait_for_event``, ``receive_message`` or ``send_request`` (Orkeon EventHub & Crew Lifecycle
specification, §5, §9.2).

Two paths run these tools: :class:`~orkeon_actors.tools.event_hub_tools.EventHubTools`
blocks the caller's thread on the hub's wait; a crew
(:class:`~orkeon_actors.crew.crew_actor.CrewActor`) parks the agent on a non-blocking
wait and formats the outcome when it resolves. Both call the functions here, so a model
reads the same JSON, and the same error text, from either path by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from orkeon_actors.errors import (
    EventAclError,
    EventHubError,
    InvalidArgumentError,
    LimitExceededError,
    MailboxNotFoundError,
    ReservedTopicError,
    SendTimeoutError,
    ToolValidationError,
    UnknownCorrelationError,
)
from orkeon_actors.model.address import MailboxAddress, Scheme
from orkeon_actors.model.ids import CorrelationId, CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import FOREVER, FiniteWaitTimeout, WaitTimeout
from orkeon_actors.model.strict_json import loads_strict
from orkeon_actors.tools.converter import unstructure
from orkeon_actors.tools.dto import (
    ReceiveMessageRequest,
    ReceiveMessageResponse,
    SendRequestRequest,
    SendRequestResponse,
    ToolError,
    ToolErrorResult,
    WaitForEventRequest,
    WaitForEventResponse,
)
from orkeon_actors.tools.payload import decode_payload

__all__ = [
    "WAITING_TOOLS",
    "decode_arguments",
    "error_result",
    "field_of",
    "receive_mailbox",
    "receive_message_response",
    "refused_result",
    "send_request_response",
    "send_target",
    "tool_result",
    "wait_for_event_response",
    "wait_result",
    "wait_timeout",
]

WAITING_TOOLS: Final = frozenset({"wait_for_event", "receive_message", "send_request"})
"""The tools whose call waits for a message (a crew parks the agent on them)."""


def decode_arguments(arguments: Mapping[str, Any] | str | bytes | None) -> object:
    """A tool call's arguments as JSON data: a mapping as given, a JSON string (as LLM
    APIs deliver them) decoded; ``None`` or a blank string mean ``{}``. Raises
    ``ToolValidationError`` for text that is not JSON."""
    if arguments is None:
        return {}
    if isinstance(arguments, (str, bytes)):
        if not arguments.strip():
            return {}
        try:
            decoded: object = loads_strict(arguments)
        except LimitExceededError:
            raise
        except InvalidArgumentError as exc:
            raise ToolValidationError(f"the arguments are not valid JSON: {exc}") from None
        return decoded
    return arguments


def wait_timeout(request: ReceiveMessageRequest | WaitForEventRequest) -> WaitTimeout:
    """The wait a ``receive_message`` / ``wait_for_event`` request asks for
    (``wait_forever`` or ``timeout_ms``; the request DTO enforces exactly one)."""
    if request.wait_forever:
        return FOREVER
    assert request.timeout_ms is not None
    return FiniteWaitTimeout(request.timeout_ms / 1000)


def receive_mailbox(request: ReceiveMessageRequest, own_mailbox: MailboxAddress, crew: CrewId) -> MailboxAddress:
    """The mailbox a ``receive_message`` call reads: the one it names, else the caller's
    own. Raises ``ToolValidationError`` (field ``mailbox``) for a mailbox of another
    crew, a ``topic://`` or another ``client://`` address (spec §10.3: reading is
    destructive, so only the owner reads; a ``client://`` peer owns its own mailbox)."""
    mailbox = request.mailbox if request.mailbox is not None else own_mailbox
    of_own_crew = mailbox.scheme in (Scheme.AGENT, Scheme.CREW) and mailbox.crew_id == crew
    if mailbox != own_mailbox and not of_own_crew:  # a client:// peer reads its own mailbox
        raise ToolValidationError(
            f"receive_message reads only mailboxes of your own crew ({crew}): agent://{crew}/{{agent}} or "
            f"crew://{crew}; omit mailbox to read your own ({own_mailbox}), {mailbox} is not one of them",
            field="mailbox",
        )
    return mailbox


def send_target(request: SendRequestRequest) -> MailboxAddress:
    """The mailbox a ``send_request`` call asks. Raises ``ToolValidationError`` (field
    ``target_mailbox``) for a topic: a topic has no single recipient to reply."""
    if request.target_mailbox.scheme is Scheme.TOPIC:
        raise ToolValidationError(
            "send_request needs a mailbox that can answer (agent://, crew:// or client://); "
            "a topic has no single recipient: use publish_event to broadcast",
            field="target_mailbox",
        )
    return request.target_mailbox


def wait_for_event_response(message: Message, missed: int) -> WaitForEventResponse:
    """A ``wait_for_event`` result: the event, or the timeout (``message.is_timeout``),
    with the events its cursor dropped since the last read."""
    if message.is_timeout:
        return WaitForEventResponse(True, metadata=message.metadata, missed=missed)
    return WaitForEventResponse(False, message=message, missed=missed)


def receive_message_response(message: Message) -> ReceiveMessageResponse:
    """A ``receive_message`` result: the message taken, or the timeout."""
    if message.is_timeout:
        return ReceiveMessageResponse(True, metadata=message.metadata)
    return ReceiveMessageResponse(False, message=message)


def send_request_response(
    correlation_id: CorrelationId, outcome: Message | SendTimeoutError | UnknownCorrelationError
) -> SendRequestResponse:
    """A ``send_request`` result: the reply's payload, or ``timed_out`` for a wait that
    expired (a timeout message, ``SendTimeoutError``, or ``UnknownCorrelationError``:
    the caller's own fresh request is only forgotten by its deadline, so it expired
    before the wait could listen)."""
    if isinstance(outcome, (SendTimeoutError, UnknownCorrelationError)) or outcome.is_timeout:
        return SendRequestResponse(correlation_id, True, None)
    return SendRequestResponse(correlation_id, False, decode_payload(outcome.payload)[0])


def field_of(tool: str, error: EventHubError) -> str | None:
    """The argument a refused call of ``tool`` is about, for the model's error result."""
    if isinstance(error, ToolValidationError):
        return error.field
    if isinstance(error, ReservedTopicError):
        return "topic" if tool == "publish_event" else "target_mailbox"
    if isinstance(error, MailboxNotFoundError):
        return "mailbox" if tool == "receive_message" else "target_mailbox"
    if isinstance(error, UnknownCorrelationError):
        return "correlation_id"
    if isinstance(error, EventAclError):
        return _ACL_FIELDS.get(tool, "target_mailbox")
    if isinstance(error, LimitExceededError):
        return _LIMIT_FIELDS.get(error.bound)
    return None


_ACL_FIELDS: Final = {"publish_event": "target_crew_id", "get_last_value": "crew_scope", "receive_message": "mailbox"}
_LIMIT_FIELDS: Final = {
    "max_payload_bytes": "payload",
    "MAX_TOPIC_BYTES": "topic",
    "MAX_TOPIC_WORDS": "topic",
    "MAX_METADATA_ENTRIES": "metadata",
    "MAX_METADATA_KEY_BYTES": "metadata",
    "MAX_METADATA_VALUE_BYTES": "metadata",
}


def tool_result(dto: object) -> dict[str, Any]:
    """A response DTO as the JSON-ready dict a model reads."""
    return dict(unstructure(dto))


def error_result(exc: BaseException, field: str | None) -> dict[str, Any]:
    """``{"error": {"type", "message", "field"}}`` for ``exc``."""
    return tool_result(ToolErrorResult(ToolError(type(exc).__name__, str(exc), field)))


def refused_result(tool: str, exc: EventHubError | ValueError) -> dict[str, Any]:
    """The result a model reads for a call of ``tool`` refused with ``exc``: a hub
    error as itself (with the argument it is about), any other ``ValueError`` as
    arguments the tool could not use."""
    if isinstance(exc, EventHubError):
        return error_result(exc, field_of(tool, exc))
    return error_result(ToolValidationError(f"the arguments are not valid JSON: {exc}"), None)


def wait_result(
    tool: str,
    outcome: Message | BaseException,
    *,
    correlation_id: CorrelationId | None = None,
    missed: int = 0,
) -> dict[str, Any]:
    """The result of a waiting ``tool`` whose wait resolved with ``outcome`` (a crew's
    parked call): as the blocking tool returns it, or its error result.
    ``correlation_id``: the request's (``send_request``); ``missed``: the cursor's
    drops (``wait_for_event``)."""
    if tool == "send_request":
        assert correlation_id is not None
        if isinstance(outcome, (SendTimeoutError, UnknownCorrelationError, Message)):
            return tool_result(send_request_response(correlation_id, outcome))
        return error_result(outcome, None)  # the wait failed otherwise: the model reads why
    if isinstance(outcome, BaseException):
        return error_result(outcome, field_of(tool, outcome) if isinstance(outcome, EventHubError) else None)
    if tool == "receive_message":
        return tool_result(receive_message_response(outcome))
    return tool_result(wait_for_event_response(outcome, missed))
