"""The store's row format: how model values appear in SQLite columns.

Datetime rule: ISO 8601 UTC text of fixed width with microseconds and a ``Z``
(``2026-01-01T00:00:00.000000Z``), so comparing the text compares the instants (the
purge relies on it); a naive datetime is refused (``ValueError``); reading accepts any
ISO 8601 text and takes a naive one as UTC.

* metadata is compact JSON text with sorted keys (``{}`` when empty);
* ids and addresses are their canonical strings; ids read back are trusted (the store
  wrote them); payloads are BLOBs.

A :class:`~orkeon_actors.model.message.Message` is stored as an *envelope*: the columns
of :class:`EnvelopeRow`, in that order (the message's ``id`` is the ``message_id``
column). :func:`envelope` and :func:`message_from_row` convert through the converter's
generated hooks: no field is copied by hand.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from orkeon_actors.errors import StoreError
from orkeon_actors.model.clock import format_utc
from orkeon_actors.model.message import EMPTY_METADATA, FrozenMap, Message
from orkeon_actors.wire.base import DatetimeRule, base_converter, trust_ulids

__all__ = [
    "ENVELOPE_COLUMNS",
    "STORE_DATETIMES",
    "EnvelopeRow",
    "configure_store_row",
    "envelope",
    "envelope_columns",
    "format_time",
    "message_from_row",
    "metadata_json",
    "parse_time",
    "store_row_converter",
]


def format_time(value: datetime) -> str:
    """Fixed-width UTC RFC 3339 text (:func:`~orkeon_actors.model.clock.format_utc`);
    lexicographic order is chronological order. A naive datetime raises ``ValueError``."""
    return format_utc(value)


def parse_time(text: str) -> datetime:
    """The aware UTC datetime of text written by :func:`format_time` (or any ISO-8601)."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


STORE_DATETIMES: Final = DatetimeRule(
    "fixed-width ISO 8601 UTC with microseconds and Z", format=format_time, parse=parse_time
)

_metadata_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def metadata_json(metadata: FrozenMap | None) -> str:
    """Metadata as the store's column text (compact JSON, sorted keys, ``{}`` when empty)."""
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


def configure_store_row(converter: cattrs.Converter) -> cattrs.Converter:
    """Register the row format's own hooks on ``converter`` (a
    :func:`~orkeon_actors.wire.base.base_converter` with :data:`STORE_DATETIMES`):
    metadata as JSON text, trusted ULIDs, BLOB payloads, and ``Message`` as the columns
    of :class:`EnvelopeRow`. Returns ``converter``."""
    trust_ulids(converter)
    converter.register_unstructure_hook(FrozenMap, metadata_json)
    converter.register_structure_hook(FrozenMap, lambda value, _: _metadata_from_json(value))
    converter.register_structure_hook(bytes, lambda value, _: bytes(value))
    renamed = override(rename="message_id")
    converter.register_unstructure_hook(Message, make_dict_unstructure_fn(Message, converter, id=renamed))
    converter.register_structure_hook(Message, make_dict_structure_fn(Message, converter, id=renamed))
    return converter


def store_row_converter() -> cattrs.Converter:
    """A new converter of the row format."""
    return configure_store_row(base_converter(STORE_DATETIMES))


_converter: Final = store_row_converter()
_unstructure_message = _converter.get_unstructure_hook(Message)
_structure_message = _converter.get_structure_hook(Message)


def envelope_columns(message: Message) -> dict[str, Any]:
    """``message`` as the store's columns, by column name (:data:`ENVELOPE_COLUMNS`): for
    a table that keeps them in its own order (the mailboxes, the outbox)."""
    columns: dict[str, Any] = _unstructure_message(message)
    return columns


def envelope(message: Message) -> tuple[Any, ...]:
    """``message`` as a row of :data:`ENVELOPE_COLUMNS`."""
    columns = _unstructure_message(message)
    return tuple(columns[name] for name in ENVELOPE_COLUMNS)


def message_from_row(row: Sequence[Any]) -> Message:
    """The :class:`Message` of a row of :data:`ENVELOPE_COLUMNS`. Raises ``StoreError``
    for a row that does not hold a valid envelope (a damaged file)."""
    try:
        message: Message = _structure_message(dict(zip(ENVELOPE_COLUMNS, row, strict=True)), Message)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise StoreError(
            f"a stored message envelope cannot be read ({type(exc).__name__}: {exc}); the store file may be "
            "damaged: restore it from a backup, or move it aside to start with an empty store"
        ) from exc
    return message
