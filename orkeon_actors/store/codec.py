"""Rows ⇄ values: the one converter that owns the store's column formats.

* timestamps are ISO-8601 UTC text of fixed width (``2026-01-01T00:00:00.000000Z``),
  so comparing the text compares the instants (the purge relies on it);
* metadata is compact JSON text (``{}`` when empty);
* ids and addresses are their canonical strings; payloads are BLOBs.

A :class:`~orkeon_actors.model.message.Message` is stored as an *envelope*: the columns
of :class:`EnvelopeRow`, in that order. ``cattrs`` structures rows back into values
(records and envelopes) with the hooks registered on :data:`converter`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import attrs
import cattrs

from orkeon_actors.errors import StoreError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import EMPTY_METADATA, FrozenMap, Message

__all__ = [
    "ENVELOPE_COLUMNS",
    "EnvelopeRow",
    "converter",
    "envelope",
    "format_time",
    "message_from_row",
    "metadata_json",
    "parse_time",
]


def format_time(value: datetime) -> str:
    """Fixed-width UTC ISO-8601 text; lexicographic order is chronological order."""
    if value.tzinfo is not UTC:
        if value.tzinfo is None:
            raise ValueError("the store only keeps aware datetimes")
        value = value.astimezone(UTC)
    return value.isoformat(timespec="microseconds")[:26] + "Z"


def parse_time(text: str) -> datetime:
    """The aware UTC datetime of text written by :func:`format_time` (or any ISO-8601)."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


_metadata_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def metadata_json(metadata: FrozenMap | None) -> str:
    if not metadata:
        return "{}"
    return _metadata_encoder.encode(dict(metadata))


def _metadata_from_json(text: str | None) -> FrozenMap:
    if not text or text == "{}":
        return EMPTY_METADATA
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"metadata column must hold a JSON object, got {text!r}")
    return FrozenMap({str(k): str(v) for k, v in data.items()})


@attrs.frozen
class EnvelopeRow:
    """A message as the store keeps it (every column a SQLite primitive)."""

    message_id: str
    topic: str
    source_crew_id: str
    source_agent_id: str | None
    target_crew_id: str | None
    target_mailbox: str | None
    correlation_id: str | None
    published_at: str
    metadata: str
    payload: bytes
    schema_id: str


ENVELOPE_COLUMNS: Final = tuple(a.name for a in attrs.fields(EnvelopeRow))
"""The envelope's column names, in row order: ``", ".join(ENVELOPE_COLUMNS)`` in SQL."""

converter = cattrs.Converter()
converter.register_unstructure_hook(datetime, format_time)
converter.register_structure_hook(datetime, lambda value, _: parse_time(value))
converter.register_unstructure_hook(FrozenMap, metadata_json)
converter.register_structure_hook(FrozenMap, lambda value, _: _metadata_from_json(value))
converter.register_unstructure_hook(MailboxAddress, str)
converter.register_structure_hook(MailboxAddress, lambda value, _: MailboxAddress.parse(value))
converter.register_structure_hook(CrewId, lambda value, _: CrewId.SYSTEM if value == CrewId.SYSTEM else CrewId(value))
converter.register_structure_hook(AgentId, lambda value, _: AgentId(value))
for _ulid_type in (MessageId, CorrelationId):
    converter.register_structure_hook(_ulid_type, lambda value, cls: cls._trusted(value))
converter.register_structure_hook(bytes, lambda value, _: bytes(value))


def envelope(message: Message) -> tuple[Any, ...]:
    """``message`` as a row of :data:`ENVELOPE_COLUMNS` (the hot path of every durable
    post: written by hand, no intermediate dict)."""
    mailbox = message.target_mailbox
    return (
        message.id,
        message.topic,
        message.source_crew_id,
        message.source_agent_id,
        message.target_crew_id,
        None if mailbox is None else str(mailbox),
        message.correlation_id,
        format_time(message.published_at),
        metadata_json(message.metadata),
        message.payload,
        message.schema_id,
    )


_MESSAGE_FIELDS: Final = {
    "message_id": "id",
    "topic": "topic",
    "source_crew_id": "source_crew_id",
    "source_agent_id": "source_agent_id",
    "target_crew_id": "target_crew_id",
    "target_mailbox": "target_mailbox",
    "correlation_id": "correlation_id",
    "published_at": "published_at",
    "metadata": "metadata",
    "payload": "payload",
    "schema_id": "schema_id",
}


def message_from_row(row: Sequence[Any]) -> Message:
    """The :class:`Message` of a row of :data:`ENVELOPE_COLUMNS`. Raises ``StoreError``
    for a row that does not hold a valid envelope (a damaged file)."""
    data = {_MESSAGE_FIELDS[name]: value for name, value in zip(ENVELOPE_COLUMNS, row, strict=True)}
    try:
        return converter.structure(data, Message)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise StoreError(
            f"a stored message envelope cannot be read ({type(exc).__name__}: {exc}); the store file may be "
            "damaged: restore it from a backup, or move it aside to start with an empty store"
        ) from exc
