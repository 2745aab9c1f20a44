"""The sent history's format: its rows and intents (sender-owned history requirements,
MESSAGE-R04), on a :func:`~orkeon_actors.wire.base.base_converter` configured by
:func:`configure_sent_history`.

Datetime rule: the tool format's (:data:`~orkeon_actors.wire.tool_json.TOOL_DATETIMES`,
ISO 8601 UTC with microseconds and ``Z``) for the ``published_at`` of an intent's
message; a row's instant is its ``sent_at_ms`` (unix milliseconds).

* :func:`record_bytes` is the *canonical* form of a :class:`SentRecord`: compact JSON,
  keys sorted, the body in base64. The ledger hashes exactly these bytes, so they must
  never change for a given record and version; a new meaning is a new
  :data:`~orkeon_actors.history.records.RECORD_VERSION`.
* ``metadata`` and ``body`` that are absent (``None``) are left out of the bytes; empty
  ones (``{}``, ``b""``) are written: the two stay distinct through every round trip.
* an endpoint's ``name`` (display only, MESSAGE-R02) is written only when there is one,
  so a record without names keeps the bytes it had; a version-1 record (no names) is
  read as such, and a version-1 endpoint that carries a name is refused.
* :func:`intent_bytes` keeps a pending send's original message (every envelope field),
  so resumption materialises and records the very bytes that were reserved.

Decoding raises :class:`SentRecordError` for bytes that are not a record of a known
version: a reader never guesses.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import cattrs

from orkeon_actors.history.endpoint import Endpoint, EndpointKind
from orkeon_actors.history.records import READABLE_VERSIONS, SendKind, SentIntent, SentRecord
from orkeon_actors.model.message import Message
from orkeon_actors.wire.base import base_converter
from orkeon_actors.wire.tool_json import TOOL_DATETIMES

__all__ = [
    "SentRecordError",
    "configure_sent_history",
    "sent_history_converter",
    "content_digest",
    "intent_bytes",
    "intent_from_bytes",
    "record_bytes",
    "record_from_bytes",
    "record_content_digest",
    "record_of",
]


class SentRecordError(ValueError):
    """Bytes that are not a sent record or intent this release can read."""


def configure_sent_history(converter: cattrs.Converter) -> cattrs.Converter:
    """Register the sent history's hooks on ``converter`` (a
    :func:`~orkeon_actors.wire.base.base_converter` with ``TOOL_DATETIMES``): bytes as
    base64 text, the endpoint and send kinds by value. Returns ``converter``."""
    converter.register_unstructure_hook(bytes, lambda value: base64.b64encode(value).decode("ascii"))
    converter.register_structure_hook(bytes, lambda value, _: base64.b64decode(value, validate=True))
    converter.register_unstructure_hook(EndpointKind, lambda value: value.value)
    converter.register_unstructure_hook(Endpoint, _endpoint_data)
    converter.register_unstructure_hook(SendKind, lambda value: value.value)
    return converter


def _endpoint_data(endpoint: Endpoint) -> dict[str, str]:
    data = {"kind": endpoint.kind.value, "id": endpoint.id, "address": endpoint.address}
    if endpoint.name is not None:
        data["name"] = endpoint.name
    return data


def sent_history_converter() -> cattrs.Converter:
    """A new converter of the sent history's records (unknown keys refused)."""
    return configure_sent_history(base_converter(TOOL_DATETIMES, forbid_extra_keys=True))


_converter = sent_history_converter()

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _dump(data: dict[str, Any]) -> bytes:
    return _encoder.encode(data).encode("utf-8")


def _load(raw: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SentRecordError(f"the {what} bytes are not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SentRecordError(f"the {what} bytes are not a JSON object")
    version = data.get("version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        known = ", ".join(str(v) for v in sorted(READABLE_VERSIONS))
        raise SentRecordError(f"the {what} is version {version!r}; this release reads versions {known}")
    if version == 1:
        for end in ("sender", "to"):
            if isinstance(data.get(end), dict) and "name" in data[end]:
                raise SentRecordError(f"the {what} is version 1, whose endpoints have no name, but its {end} has one")
    return data


def record_bytes(record: SentRecord) -> bytes:
    """The canonical bytes of ``record`` (what the ledger hashes): the converter's
    unstructured form, built field by field (it is on every agent post's path; a test
    holds it byte for byte to :func:`sent_history_converter`'s)."""
    data: dict[str, Any] = {
        "message_id": record.message_id,
        "kind": record.kind.value,
        "sender": _endpoint_data(record.sender),
        "to": _endpoint_data(record.to),
        "sent_at_ms": record.sent_at_ms,
        "topic": record.topic,
        "correlation_id": record.correlation_id,
        "idempotency_key": record.idempotency_key,
        "schema_id": record.schema_id,
        "version": record.version,
    }
    if record.metadata is not None:
        data["metadata"] = dict(record.metadata)
    if record.body is not None:
        data["body"] = base64.b64encode(record.body).decode("ascii")
    return _dump(data)


def record_from_bytes(raw: bytes) -> SentRecord:
    """The record behind :func:`record_bytes`; ``SentRecordError`` for anything else."""
    data = _load(raw, "sent row")
    data.setdefault("metadata", None)
    data.setdefault("body", None)
    try:
        return _converter.structure(data, SentRecord)
    except (cattrs.BaseValidationError, ValueError, KeyError, TypeError) as exc:
        raise SentRecordError(f"the sent row bytes do not hold a record of their version ({exc})") from exc


def intent_bytes(intent: SentIntent) -> bytes:
    """The bytes of a pending send, with its original message."""
    return _dump(_converter.unstructure(intent))


def intent_from_bytes(raw: bytes) -> SentIntent:
    data = _load(raw, "sent intent")
    try:
        return _converter.structure(data, SentIntent)
    except (cattrs.BaseValidationError, ValueError, KeyError, TypeError) as exc:
        raise SentRecordError(f"the sent intent bytes do not hold an intent of their version ({exc})") from exc


def _ms(value: datetime) -> int:
    return int(value.astimezone(UTC).timestamp() * 1000)


def record_of(intent: SentIntent) -> SentRecord:
    """The completed row of ``intent``: the message's content, sent at its stamp."""
    message = intent.message
    return SentRecord(
        message_id=str(message.id),
        kind=intent.kind,
        sender=intent.sender,
        to=intent.to,
        sent_at_ms=_ms(message.published_at),
        topic=message.topic,
        correlation_id=None if message.correlation_id is None else str(message.correlation_id),
        idempotency_key=intent.idempotency_key,
        metadata=dict(message.metadata),
        body=bytes(message.payload),
        schema_id=message.schema_id,
    )


def content_digest(kind: SendKind, to: Endpoint, message: Message) -> bytes:
    """What "the same message" means for a reused idempotency key (MESSAGE-R07): the
    kind, the canonical recipient, the topic, schema, metadata and body; not the id,
    the time or the correlation id the hub stamps anew on each call."""
    return _digest(kind, to, message.topic, message.schema_id, dict(message.metadata), bytes(message.payload))


def record_content_digest(record: SentRecord) -> bytes:
    """:func:`content_digest` of the message behind ``record`` (what its row's
    ``content`` column must hold for a keyed retry to compare against)."""
    return _digest(record.kind, record.to, record.topic, record.schema_id, record.metadata or {}, record.body or b"")


def _digest(kind: SendKind, to: Endpoint, topic: str, schema_id: str, metadata: dict[str, str], body: bytes) -> bytes:
    data = {
        "kind": kind.value,
        "to": to.key,
        "topic": topic,
        "schema_id": schema_id,
        "metadata": metadata,
        "body": base64.b64encode(body).decode("ascii"),
    }
    return hashlib.sha256(_dump(data)).digest()
