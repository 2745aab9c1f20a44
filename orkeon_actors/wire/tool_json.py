"""The tools' JSON format: how model values appear in what a model reads and writes.

Datetime rule: ISO 8601 in UTC with microseconds and a ``Z``
(``2026-01-01T12:00:00.000000Z``); an aware datetime in another zone is converted, a
naive one refused (``ValueError``). Reading requires a UTC offset (or ``Z``): a model
must not leave the zone to guesswork.

A :class:`~orkeon_actors.model.message.Message` is its *envelope*: every field under its
own name, the payload decoded as :mod:`orkeon_actors.wire.payload` says, plus
``payload_encoding``. The envelope's class (with each field's documentation) is the
tools' DTO; :func:`envelope_fields` / :func:`message_fields` map between the two by
field name, so a field added to ``Message`` cannot be forgotten (a mismatch raises
``TypeError`` when the tools' converter is built).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

import attrs
import cattrs

from orkeon_actors.model.clock import format_utc
from orkeon_actors.model.message import Message
from orkeon_actors.wire.base import DatetimeRule, base_converter, json_kind
from orkeon_actors.wire.payload import decode_payload, encode_decoded_payload

__all__ = [
    "ENVELOPE_EXTRA_FIELDS",
    "TOOL_DATETIMES",
    "check_envelope_class",
    "configure_tool_json",
    "envelope_fields",
    "format_datetime",
    "message_fields",
    "parse_datetime",
    "tool_json_converter",
]


def format_datetime(value: datetime) -> str:
    """RFC 3339 in UTC, ``Z`` suffix, microseconds (:func:`~orkeon_actors.model.clock.format_utc`).
    Raises ``ValueError`` for a naive datetime."""
    return format_utc(value)


def parse_datetime(value: object) -> datetime:
    """An aware UTC datetime from an ISO 8601 string with an offset (or ``Z``)."""
    if not isinstance(value, str):
        raise TypeError(f"expected an ISO 8601 timestamp string, got {json_kind(value)}")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no UTC offset; append 'Z'")
    return parsed.astimezone(UTC)


TOOL_DATETIMES: Final = DatetimeRule(
    "ISO 8601 UTC with microseconds and Z; an offset is required", format=format_datetime, parse=parse_datetime
)

ENVELOPE_EXTRA_FIELDS: Final = ("payload_encoding",)
"""The envelope's fields that a ``Message`` does not have."""

_MESSAGE_FIELDS: Final = tuple(field.name for field in attrs.fields(Message))
_COPIED: Final = tuple(name for name in _MESSAGE_FIELDS if name != "payload")


def check_envelope_class(envelope_class: type) -> None:
    """Raise ``TypeError`` unless ``envelope_class`` has exactly the fields of a
    ``Message`` plus :data:`ENVELOPE_EXTRA_FIELDS`."""
    names = {field.name for field in attrs.fields(envelope_class)}
    expected = set(_MESSAGE_FIELDS) | set(ENVELOPE_EXTRA_FIELDS)
    if names != expected:
        raise TypeError(
            f"{envelope_class.__name__} must have the fields of Message plus {ENVELOPE_EXTRA_FIELDS}: "
            f"missing {sorted(expected - names)}, unexpected {sorted(names - expected)}"
        )


def envelope_fields(message: Message) -> dict[str, Any]:
    """The envelope of ``message`` as constructor arguments (values, not JSON)."""
    payload, encoding = decode_payload(message.payload)
    fields = {name: getattr(message, name) for name in _COPIED}
    fields["payload"] = payload
    fields["payload_encoding"] = encoding
    return fields


def message_fields(envelope: object) -> dict[str, Any]:
    """The ``Message`` an envelope describes, as constructor arguments. Raises
    ``InvalidArgumentError`` when the payload does not fit its ``payload_encoding``."""
    fields = {name: getattr(envelope, name) for name in _COPIED}
    fields["payload"] = encode_decoded_payload(envelope.payload, envelope.payload_encoding)  # type: ignore[attr-defined]
    return fields


def configure_tool_json(converter: cattrs.Converter, envelope_class: type) -> cattrs.Converter:
    """Register the tool format's ``Message`` hooks on ``converter`` (a
    :func:`~orkeon_actors.wire.base.base_converter` with :data:`TOOL_DATETIMES`): a
    message is written and read as ``envelope_class`` (checked with
    :func:`check_envelope_class`). Returns ``converter``."""
    check_envelope_class(envelope_class)
    converter.register_unstructure_hook(
        Message, lambda message: converter.unstructure(envelope_class(**envelope_fields(message)))
    )
    converter.register_structure_hook(
        Message, lambda value, _: Message(**message_fields(converter.structure(value, envelope_class)))
    )
    return converter


def tool_json_converter(envelope_class: type) -> cattrs.Converter:
    """A new converter of the tool format: unknown fields refused, errors detailed per
    field (the tools turn them into ``ToolValidationError``), attrs converters preferred."""
    converter = base_converter(
        TOOL_DATETIMES, forbid_extra_keys=True, detailed_validation=True, prefer_attrib_converters=True
    )
    return configure_tool_json(converter, envelope_class)
