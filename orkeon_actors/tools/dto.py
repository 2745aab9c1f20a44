"""The wire shapes of the seven tools (spec §5): frozen attrs request and response DTOs.

Field names are the snake_case JSON names. Each field's ``metadata`` carries the
description a model reads and any JSON Schema keywords beyond its type
(:mod:`orkeon_actors.tools.schema` builds the schemas from these classes), and every
request field has a converter from :mod:`orkeon_actors.tools.validation` that refuses bad
input with a :class:`~orkeon_actors.errors.ToolValidationError` naming the field. The one
converter of :mod:`orkeon_actors.tools.converter` turns JSON into these classes and back;
nothing else builds or reads tool dictionaries.

Optional request fields default to ``None`` and accept ``null`` as "not given".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

import attrs

from orkeon_actors.errors import ToolValidationError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import FrozenMap, Message
from orkeon_actors.tools.validation import (
    GLOBAL_SCOPE,
    MAX_TIMEOUT_MS,
    check_exactly_one_wait,
    to_correlation_id,
    to_crew_id,
    to_crew_scope,
    to_flag,
    to_forever_flag,
    to_key,
    to_mailbox,
    to_metadata,
    to_payload,
    to_timeout_ms,
    to_topic,
    to_topic_pattern,
)
from orkeon_actors.wire.payload import PAYLOAD_ENCODINGS
from orkeon_actors.wire.tool_json import envelope_fields, message_fields

__all__ = [
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
    "WaitForEventRequest",
    "WaitForEventResponse",
    "doc",
]

DESCRIPTION = "description"
SCHEMA = "json_schema"


def doc(description: str, **schema: Any) -> dict[str, Any]:
    """Field metadata: the description a model reads, plus extra JSON Schema keywords."""
    return {DESCRIPTION: description, SCHEMA: schema}


_TIMEOUT_SCHEMA: dict[str, Any] = {"minimum": 1, "maximum": MAX_TIMEOUT_MS}
_PAYLOAD_DOC = "The message body: any JSON value (object, array, string, number, boolean or null)."
_METADATA_DOC = (
    'Optional string-to-string headers carried with the message, e.g. {"priority": "high"}. '
    "Numbers and booleans must be sent as strings."
)


# -- field converters: the rules of validation.py bound to each wire name --------------


def _topic(value: object) -> str:
    return to_topic("topic", value)


def _topic_pattern(value: object) -> str:
    return to_topic_pattern("topic", value)


def _payload(value: object) -> Any:
    return to_payload("payload", value)


def _target_crew_id(value: object) -> CrewId | None:
    return to_crew_id("target_crew_id", value)


def _metadata(value: object) -> FrozenMap | None:
    return to_metadata("metadata", value)


def _metadata_match(value: object) -> FrozenMap | None:
    return to_metadata("metadata_match", value)


def _retain_as_last_value(value: object) -> bool | None:
    return to_flag("retain_as_last_value", value)


def _last_value_key(value: object) -> str | None:
    return None if value is None else to_key("last_value_key", value)


def _target_mailbox(value: object) -> MailboxAddress:
    return to_mailbox("target_mailbox", value)


def _mailbox(value: object) -> MailboxAddress | None:
    return None if value is None else to_mailbox("mailbox", value)


def _required_timeout_ms(value: object) -> int:
    return to_timeout_ms("timeout_ms", value)


def _timeout_ms(value: object) -> int | None:
    return None if value is None else to_timeout_ms("timeout_ms", value)


def _wait_forever(value: object) -> bool | None:
    return to_forever_flag("wait_forever", value)


def _correlation_id(value: object) -> CorrelationId:
    return to_correlation_id("correlation_id", value)


def _key(value: object) -> str:
    return to_key("key", value)


def _crew_scope(value: object) -> str | None:
    return to_crew_scope("crew_scope", value)


# -- the envelope (spec §6.1) ---------------------------------------------------------


@attrs.frozen
class MessageEnvelope:
    """A message as a model reads it: every §6.1 field, ``published_at`` in ISO 8601
    UTC, the payload decoded (see :mod:`orkeon_actors.tools.payload`)."""

    id: MessageId = attrs.field(metadata=doc("Unique id of the message (ULID)."))
    topic: str = attrs.field(
        metadata=doc(
            "Topic of the message. Mailbox traffic carries a hub topic: _system.post for a "
            "posted message, _system.send for a request (answer it with reply_to), "
            "_system.reply for a reply."
        )
    )
    source_crew_id: CrewId = attrs.field(metadata=doc("Crew that sent the message, stamped by the hub."))
    source_agent_id: AgentId | None = attrs.field(
        metadata=doc("Agent that sent the message, stamped by the hub; null when the hub itself sent it.")
    )
    target_crew_id: CrewId | None = attrs.field(
        metadata=doc("Crew the message is scoped to; null for a global broadcast.")
    )
    target_mailbox: MailboxAddress | None = attrs.field(
        metadata=doc("Mailbox the message was addressed to; null for a topic broadcast.")
    )
    correlation_id: CorrelationId | None = attrs.field(
        metadata=doc(
            "Set on a request (topic _system.send): pass it to reply_to to answer. "
            "Also set on the reply to a request. Null otherwise."
        )
    )
    published_at: datetime = attrs.field(metadata=doc("When the hub accepted the message (ISO 8601, UTC)."))
    metadata: FrozenMap = attrs.field(metadata=doc("String-to-string headers of the message."))
    payload: Any = attrs.field(metadata=doc("The body, decoded as payload_encoding says."))
    payload_encoding: str = attrs.field(
        metadata=doc(
            "How payload is given: json (the decoded JSON value), text (UTF-8 that is not JSON) "
            "or base64 (other bytes).",
            enum=list(PAYLOAD_ENCODINGS),
        )
    )
    schema_id: str = attrs.field(metadata=doc('Declared schema of the payload; "_none" when none was declared.'))

    @classmethod
    def from_message(cls, message: Message) -> MessageEnvelope:
        """The envelope of ``message`` (the tool JSON format's mapping,
        :func:`orkeon_actors.wire.tool_json.envelope_fields`)."""
        return cls(**envelope_fields(message))

    def to_message(self) -> Message:
        """The message this envelope describes. Raises ``InvalidArgumentError`` when the
        payload does not fit ``payload_encoding``."""
        return Message(**message_fields(self))


# -- publish_event --------------------------------------------------------------------


@attrs.frozen
class PublishEventRequest:
    """Input of ``publish_event``: broadcast on a topic (spec §4, Publish)."""

    topic: str = attrs.field(
        converter=_topic,
        metadata=doc(
            "Topic to publish on: dot-separated words of letters, digits, '_' or '-', e.g. "
            "'orders.created'. No wildcards. Topics starting with '_system.' are reserved.",
            pattern=r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$",
        ),
    )
    payload: Any = attrs.field(converter=_payload, metadata=doc(_PAYLOAD_DOC))
    target_crew_id: CrewId | None = attrs.field(
        default=None,
        converter=_target_crew_id,
        metadata=doc("Deliver only to this crew's subscribers. Omit for a global broadcast."),
    )
    metadata: FrozenMap | None = attrs.field(default=None, converter=_metadata, metadata=doc(_METADATA_DOC))
    retain_as_last_value: bool | None = attrs.field(
        default=None,
        converter=_retain_as_last_value,
        metadata=doc(
            "Also keep this message as the last value under last_value_key, readable later with "
            "get_last_value. Requires last_value_key."
        ),
    )
    last_value_key: str | None = attrs.field(
        default=None,
        converter=_last_value_key,
        metadata=doc(
            "Slot name for retain_as_last_value. The slot belongs to target_crew_id's crew, or "
            f"is global when target_crew_id is omitted (read it with crew_scope '{GLOBAL_SCOPE}').",
            minLength=1,
        ),
    )

    def __attrs_post_init__(self) -> None:
        if self.retain_as_last_value and self.last_value_key is None:
            raise ToolValidationError(
                "retain_as_last_value: true needs last_value_key, the name of the slot to keep the value in",
                field="last_value_key",
            )
        if self.last_value_key is not None and not self.retain_as_last_value:
            raise ToolValidationError(
                "last_value_key is only used with retain_as_last_value: true; add it, or omit last_value_key",
                field="last_value_key",
            )


@attrs.frozen
class PublishEventResponse:
    """Output of ``publish_event``."""

    event_id: MessageId = attrs.field(metadata=doc("Id of the published message."))
    published_at: datetime = attrs.field(metadata=doc("When the hub accepted it (ISO 8601, UTC)."))


# -- post_message ---------------------------------------------------------------------

_IDEMPOTENCY_DOC = (
    "Optional. A key of yours for this exact message (e.g. order-42): sending again with the same key "
    "to the same recipient and the same content returns the original message instead of sending twice; "
    "other content with a used key is an error. Omit it for an ordinary send."
)


def _idempotency_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 200:
        raise ToolValidationError(
            "idempotency_key must be a non-empty string of at most 200 characters (or omitted)",
            field="idempotency_key",
        )
    return value


def _key_field() -> Any:
    return attrs.field(
        default=None, converter=_idempotency_key, metadata=doc(_IDEMPOTENCY_DOC, minLength=1, maxLength=200)
    )


_MAILBOX_DOC = (
    "Mailbox address: agent://{crew}/{agent} (an agent), crew://{crew} (a crew), "
    "client://{name} (an external client), a2a://{name} (an external A2A agent) or topic://{topic} "
    "(publishes on that topic)."
)


@attrs.frozen
class PostMessageRequest:
    """Input of ``post_message``: fire-and-forget to one mailbox (spec §4, Post)."""

    target_mailbox: MailboxAddress = attrs.field(converter=_target_mailbox, metadata=doc(_MAILBOX_DOC))
    payload: Any = attrs.field(converter=_payload, metadata=doc(_PAYLOAD_DOC))
    metadata: FrozenMap | None = attrs.field(default=None, converter=_metadata, metadata=doc(_METADATA_DOC))
    idempotency_key: str | None = _key_field()


@attrs.frozen
class PostMessageResponse:
    """Output of ``post_message``."""

    message_id: MessageId = attrs.field(metadata=doc("Id of the posted message."))
    posted_at: datetime = attrs.field(metadata=doc("When the hub accepted it (ISO 8601, UTC)."))


# -- send_request ---------------------------------------------------------------------


@attrs.frozen
class SendRequestRequest:
    """Input of ``send_request``: request-response with a mandatory timeout (§9.3)."""

    _field_hints: ClassVar[Mapping[str, str]] = {
        "wait_forever": (
            "send_request has no wait_forever: a request always has a finite timeout_ms "
            "(a requester must not be suspended indefinitely)"
        ),
    }

    target_mailbox: MailboxAddress = attrs.field(
        converter=_target_mailbox,
        metadata=doc(
            "Mailbox of the recipient: agent://{crew}/{agent}, crew://{crew}, client://{name} "
            "or a2a://{name} (an external A2A agent)."
        ),
    )
    payload: Any = attrs.field(converter=_payload, metadata=doc("The request body: any JSON value."))
    timeout_ms: int = attrs.field(
        converter=_required_timeout_ms,
        metadata=doc(
            "Required. How long to wait for the reply, in milliseconds (e.g. 30000). "
            "There is no wait-forever for requests.",
            **_TIMEOUT_SCHEMA,
        ),
    )
    metadata: FrozenMap | None = attrs.field(default=None, converter=_metadata, metadata=doc(_METADATA_DOC))
    idempotency_key: str | None = _key_field()


@attrs.frozen
class SendRequestResponse:
    """Output of ``send_request``: the reply, or ``timed_out: true``."""

    correlation_id: CorrelationId = attrs.field(metadata=doc("Correlation id of the request."))
    timed_out: bool = attrs.field(metadata=doc("True when no reply came within timeout_ms."))
    response_payload: Any = attrs.field(
        metadata=doc("The reply body (decoded JSON, else text); null when timed_out is true.")
    )


# -- reply_to -------------------------------------------------------------------------


@attrs.frozen
class ReplyToRequest:
    """Input of ``reply_to``: answer a pending request, once."""

    correlation_id: CorrelationId = attrs.field(
        converter=_correlation_id,
        metadata=doc(
            "The correlation_id of a request you received (a message on topic _system.send). "
            "Each request can be answered once.",
            pattern=r"^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$",
        ),
    )
    payload: Any = attrs.field(converter=_payload, metadata=doc("The reply body: any JSON value."))
    idempotency_key: str | None = _key_field()


@attrs.frozen
class ReplyToResponse:
    """Output of ``reply_to``."""

    replied_at: datetime = attrs.field(metadata=doc("When the hub accepted the reply (ISO 8601, UTC)."))


# -- receive_message / wait_for_event -------------------------------------------------

_TIMEOUT_MS_WAIT_DOC = (
    "Wait at most this many milliseconds (e.g. 60000). Give exactly one of timeout_ms and wait_forever."
)
_FOREVER_DOC = (
    "true to wait without a time limit, until a message arrives. Give exactly one of timeout_ms "
    "and wait_forever; never send false (omit the field instead)."
)
_TIMED_OUT_METADATA_DOC = (
    "Only when timed_out is true: original_topic, original_wait_id and original_started_at of the wait that expired."
)


@attrs.frozen
class ReceiveMessageRequest:
    """Input of ``receive_message``: take the oldest message of a mailbox of your crew."""

    timeout_ms: int | None = attrs.field(
        default=None,
        converter=_timeout_ms,
        metadata=doc(_TIMEOUT_MS_WAIT_DOC, **_TIMEOUT_SCHEMA),
    )
    wait_forever: bool | None = attrs.field(
        default=None, converter=_wait_forever, metadata=doc(_FOREVER_DOC, const=True)
    )
    mailbox: MailboxAddress | None = attrs.field(
        default=None,
        converter=_mailbox,
        metadata=doc(
            "Mailbox to read: your own (the default) or another mailbox of your crew, "
            "agent://{your crew}/{agent} or crew://{your crew}."
        ),
    )

    def __attrs_post_init__(self) -> None:
        check_exactly_one_wait(self)


@attrs.frozen
class ReceiveMessageResponse:
    """Output of ``receive_message``: ``{timed_out: false, message}`` or
    ``{timed_out: true, metadata}`` (absent fields are omitted on the wire)."""

    timed_out: bool = attrs.field(metadata=doc("True when no message arrived in time."))
    message: Message | None = attrs.field(
        default=None, metadata=doc("The message taken from the mailbox (removed from it).")
    )
    metadata: FrozenMap | None = attrs.field(default=None, metadata=doc(_TIMED_OUT_METADATA_DOC))


@attrs.frozen
class WaitForEventRequest:
    """Input of ``wait_for_event``: the next event on a topic pattern (spec §5.2 loop)."""

    topic: str = attrs.field(
        converter=_topic_pattern,
        metadata=doc(
            "Topic pattern: dot-separated words where '*' matches exactly one word and '#' zero or "
            "more, e.g. 'orders.*' or 'orders.#'.",
            pattern=r"^(?:[A-Za-z0-9_-]+|\*|#)(?:\.(?:[A-Za-z0-9_-]+|\*|#))*$",
        ),
    )
    timeout_ms: int | None = attrs.field(
        default=None,
        converter=_timeout_ms,
        metadata=doc(_TIMEOUT_MS_WAIT_DOC, **_TIMEOUT_SCHEMA),
    )
    wait_forever: bool | None = attrs.field(
        default=None, converter=_wait_forever, metadata=doc(_FOREVER_DOC, const=True)
    )
    metadata_match: FrozenMap | None = attrs.field(
        default=None,
        converter=_metadata_match,
        metadata=doc("Only events whose metadata contains every one of these string pairs."),
    )

    def __attrs_post_init__(self) -> None:
        check_exactly_one_wait(self)


@attrs.frozen
class WaitForEventResponse:
    """Output of ``wait_for_event``: ``{timed_out: false, message}`` or
    ``{timed_out: true, metadata}``; ``missed`` appears only when messages were dropped."""

    timed_out: bool = attrs.field(metadata=doc("True when no matching event arrived in time."))
    message: Message | None = attrs.field(default=None, metadata=doc("The event."))
    metadata: FrozenMap | None = attrs.field(default=None, metadata=doc(_TIMED_OUT_METADATA_DOC))
    missed: int = attrs.field(
        default=0,
        metadata=doc(
            "Only when non-zero: how many older events of this topic were dropped, unseen, because "
            "too many piled up between your calls.",
            minimum=1,
        ),
    )


# -- get_last_value -------------------------------------------------------------------


@attrs.frozen
class GetLastValueRequest:
    """Input of ``get_last_value``: read a retained slot."""

    key: str = attrs.field(
        converter=_key, metadata=doc("The last_value_key the value was retained under.", minLength=1)
    )
    crew_scope: str | None = attrs.field(
        default=None,
        converter=_crew_scope,
        metadata=doc(
            "Crew whose slot to read; defaults to your own crew. Use "
            f"'{GLOBAL_SCOPE}' for values published without target_crew_id.",
            pattern=rf"^(?:{GLOBAL_SCOPE}|[A-Za-z0-9][A-Za-z0-9._-]{{0,127}})$",
        ),
    )


@attrs.frozen
class GetLastValueResponse:
    """Output of ``get_last_value``. ``found`` separates a retained JSON ``null``
    (``found: true, value: null``) from an empty slot (``found: false``)."""

    found: bool = attrs.field(metadata=doc("Whether a value is retained under the key."))
    value: Any = attrs.field(metadata=doc("The retained payload (decoded JSON, else text); null when not found."))
    set_at: datetime | None = attrs.field(
        metadata=doc("When the retained value was published (ISO 8601, UTC); null when not found.")
    )


# -- errors as tool results -----------------------------------------------------------


@attrs.frozen
class ToolError:
    """A refused call, as a model reads it."""

    type: str = attrs.field(metadata=doc("Error class, e.g. ToolValidationError or MailboxNotFoundError."))
    message: str = attrs.field(metadata=doc("What was wrong and what to send instead."))
    field: str | None = attrs.field(metadata=doc("The argument at fault; null when the call as a whole is."))


@attrs.frozen
class ToolErrorResult:
    """``{"error": {"type", "message", "field"}}``: the result of a refused call."""

    error: ToolError = attrs.field(metadata=doc("Why the call was refused."))
