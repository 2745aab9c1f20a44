"""The AMQP envelope: how a :class:`~orkeon_actors.model.message.Message` travels between
hosts (cross-host messaging design, §2 invariant 6 and §6).

One module owns this wire format (it imports only the model), so that it moves as a
whole to the wire-format owner.

An envelope is an AMQP message whose **body** is one line of canonical JSON (the
message's fields, :data:`ENVELOPE_VERSION`, the envelope ``kind`` and its extras), a
newline, then the payload bytes unchanged (no base64: the payload is usually JSON
already). Its **headers** are the signed subset of
:mod:`orkeon_actors.fleet.signing` (``message_id``, ``from``, ``to``, ``host``,
``expires_at``) plus the signature; because the body is covered by the signature too,
no field that routes or authorizes a message can be altered in flight.

Kinds: ``post`` (a mailbox post or a request: ``correlation_id`` set), ``topic`` (a
publish, possibly retained: ``retain`` = ``[scope, key]``) and ``answer`` (a reply to a
request of the receiving host). :func:`decode` raises ``SignatureError`` for a body it
cannot read (the gateway dead-letters it like any other refused message).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from orkeon_actors.errors import InvalidIdError, InvalidMailboxAddressError, SignatureError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.clock import format_utc
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import Message

__all__ = ["ENVELOPE_VERSION", "KINDS", "Envelope", "decode", "encode", "sender_of"]

ENVELOPE_VERSION: Final = 1
KINDS: Final = ("post", "topic", "answer")


@attrs.frozen
class Envelope:
    """A decoded envelope: the message, its kind, when it expires (unix ms), the host
    that signed it, and for a retained publish its ``(scope, key)``."""

    message: Message
    kind: str
    expires_at_ms: int
    host: str
    retain: tuple[CrewId | None, str] | None = None


def sender_of(message: Message, gateway: str) -> str:
    """The entity a message claims as its sender, checked against signed presence:
    ``agent://crew/agent`` for an agent, ``crew://crew`` for a crew-level caller, and
    ``gateway`` (the publishing host's gateway entity) for system traffic."""
    if message.source_crew_id.is_system:
        return gateway
    if message.source_agent_id is not None:
        return str(MailboxAddress.agent(str(message.source_crew_id), str(message.source_agent_id)))
    return f"crew://{message.source_crew_id}"


def encode(
    message: Message,
    *,
    kind: str,
    to: str,
    sender: str,
    expires_at_ms: int,
    retain: tuple[CrewId | None, str] | None = None,
) -> tuple[dict[str, object], bytes]:
    """The unsigned headers and the body of ``message`` (sign the headers with
    :meth:`~orkeon_actors.fleet.signing.Signer.sign`). ``to`` is the routing key it is
    published with."""
    if kind not in KINDS:
        raise ValueError(f"unknown envelope kind {kind!r}; one of {KINDS}")
    meta: dict[str, Any] = {
        "v": ENVELOPE_VERSION,
        "kind": kind,
        "id": str(message.id),
        "topic": message.topic,
        "source_crew_id": str(message.source_crew_id),
        "source_agent_id": None if message.source_agent_id is None else str(message.source_agent_id),
        "published_at": format_utc(message.published_at),
        "metadata": dict(message.metadata),
        "target_crew_id": None if message.target_crew_id is None else str(message.target_crew_id),
        "target_mailbox": None if message.target_mailbox is None else str(message.target_mailbox),
        "correlation_id": None if message.correlation_id is None else str(message.correlation_id),
        "schema_id": message.schema_id,
        "retain": None if retain is None else [None if retain[0] is None else str(retain[0]), retain[1]],
    }
    body = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode() + b"\n" + message.payload
    headers: dict[str, object] = {
        "message_id": str(message.id),
        "from": sender,
        "to": to,
        "expires_at": expires_at_ms,
    }
    return headers, body


def _parse_time(text: str) -> datetime:
    parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _crew(text: str) -> CrewId:
    return CrewId.SYSTEM if text == str(CrewId.SYSTEM) else CrewId(text)


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


def decode(headers: Mapping[str, object], body: bytes) -> Envelope:
    """The envelope of an AMQP message (signature not checked here: see
    :class:`~orkeon_actors.fleet.signing.Verifier`). ``SignatureError`` if the body is
    not an envelope of this version or disagrees with its signed headers."""
    line, newline, payload = body.partition(b"\n")
    try:
        if not newline:
            raise ValueError("no header line")
        meta = json.loads(line)
        if meta.get("v") != ENVELOPE_VERSION or meta.get("kind") not in KINDS:
            raise ValueError(f"envelope version {meta.get('v')!r} / kind {meta.get('kind')!r} not understood")
        if str(headers.get("message_id")) != meta["id"]:
            raise ValueError("the body's message id differs from the signed header's")
        agent = _optional(meta["source_agent_id"])
        target_crew = _optional(meta["target_crew_id"])
        mailbox = _optional(meta["target_mailbox"])
        correlation = _optional(meta["correlation_id"])
        message = Message(
            MessageId(meta["id"]),
            str(meta["topic"]),
            _crew(str(meta["source_crew_id"])),
            _parse_time(str(meta["published_at"])),
            payload,
            {str(k): str(v) for k, v in dict(meta["metadata"]).items()},
            None if agent is None else AgentId(agent),
            None if target_crew is None else CrewId(target_crew),
            None if mailbox is None else MailboxAddress.parse(mailbox),
            None if correlation is None else CorrelationId(correlation),
            str(meta["schema_id"]),
        )
        retained = meta.get("retain")
        retain = None
        if retained is not None:
            scope = _optional(retained[0])
            retain = (None if scope is None else CrewId(scope), str(retained[1]))
        return Envelope(message, str(meta["kind"]), int(str(headers["expires_at"])), str(headers["host"]), retain)
    except (ValueError, KeyError, TypeError, IndexError, InvalidIdError, InvalidMailboxAddressError) as exc:
        raise SignatureError(f"not a readable orkeon envelope ({exc}): refused") from exc
