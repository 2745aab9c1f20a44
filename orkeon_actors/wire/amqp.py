"""The envelope of a message on an AMQP broker: how the distributed hub's hosts carry a
:class:`~orkeon_actors.model.message.Message` (cross-host messaging design, §2 invariant 6).

Datetime rule: the tool format's (:data:`~orkeon_actors.wire.tool_json.TOOL_DATETIMES`):
ISO 8601 UTC with microseconds and ``Z``; an offset is required on input, since a
message from another process must not leave its instant to the reader's zone.

A :class:`~orkeon_actors.model.message.Message` is a table of its fields under their own
names (what an AMQP headers table holds: strings, ``None`` for absent fields, metadata
as a nested table) with the payload, unchanged bytes, under ``body`` (the AMQP message
body). Ids read back are validated: a broker is not this process.

On the wire (:func:`encode` / :func:`decode`), the AMQP message's **body** is one line of
canonical JSON (:data:`ENVELOPE_VERSION`, the envelope ``kind``, its extras, and that
table of the message's fields without ``body``), a newline, then the payload bytes
unchanged (no base64: the payload is usually JSON already). Its **headers** are the
signed subset of the fleet's signing (``message_id``, ``from``, ``to``, ``host``,
``expires_at``) plus the signature; because the body is covered by the signature too,
no field that routes or authorizes a message can be altered in flight.

Kinds: ``post`` (a mailbox post or a request: ``correlation_id`` set), ``topic`` (a
publish, possibly retained: ``retain`` = ``[scope, key]``) and ``answer`` (a reply to a
request of the receiving host). A post whose sender waits for its delivery
(``confirm_delivery=True``) carries ``"receipt": true`` in that line (absent otherwise).
:func:`decode` raises ``SignatureError`` for a body it cannot read (the gateway
dead-letters it like any other refused message).

A **DELIVERED receipt** (:func:`encode_receipt` / :func:`decode_receipt`) is no message:
its body is one line of canonical JSON (``v``, ``kind`` = ``"receipt"``, ``delivered``:
the id of the post it confirms, ``mailbox``: where it is held) and a newline; its headers
are the signed subset, with ``message_id`` = ``<delivered id>.delivered``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from orkeon_actors.errors import InvalidArgumentError, SignatureError
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.wire.base import base_converter
from orkeon_actors.wire.tool_json import TOOL_DATETIMES

__all__ = [
    "AMQP_DATETIMES",
    "ENVELOPE_VERSION",
    "KINDS",
    "RECEIPT_KIND",
    "Envelope",
    "Receipt",
    "amqp_envelope_converter",
    "configure_amqp_envelope",
    "decode",
    "decode_receipt",
    "encode",
    "encode_receipt",
    "is_receipt",
    "sender_of",
]

AMQP_DATETIMES = TOOL_DATETIMES


def configure_amqp_envelope(converter: cattrs.Converter) -> cattrs.Converter:
    """Register the AMQP envelope's ``Message`` hooks on ``converter`` (a
    :func:`~orkeon_actors.wire.base.base_converter` with :data:`AMQP_DATETIMES`).
    Returns ``converter``."""
    body = override(rename="body")
    converter.register_structure_hook(bytes, lambda value, _: bytes(value))
    converter.register_unstructure_hook(Message, make_dict_unstructure_fn(Message, converter, payload=body))
    converter.register_structure_hook(Message, make_dict_structure_fn(Message, converter, payload=body))
    return converter


def amqp_envelope_converter() -> cattrs.Converter:
    """A new converter of the AMQP envelope (unknown keys refused)."""
    return configure_amqp_envelope(base_converter(AMQP_DATETIMES, forbid_extra_keys=True))


ENVELOPE_VERSION: Final = 2
KINDS: Final = ("post", "topic", "answer")
_CONVERTER = amqp_envelope_converter()


@attrs.frozen
class Envelope:
    """A decoded envelope: the message, its kind, when it expires (unix ms), the host
    that signed it, and for a retained publish its ``(scope, key)``."""

    message: Message
    kind: str
    expires_at_ms: int
    host: str
    retain: tuple[CrewId | None, str] | None = None
    receipt: bool = False
    """Its sender waits for a DELIVERED receipt (``post(..., confirm_delivery=True)``)."""


def sender_of(message: Message, gateway: str) -> str:
    """The entity a message claims as its sender, checked against signed presence:
    ``agent://crew/agent`` for an agent, ``crew://crew`` for a crew-level caller, and
    ``gateway`` (the publishing host's gateway entity) for system traffic."""
    if message.source_crew_id.is_system:
        return gateway
    if message.source_agent_id is not None:
        return f"agent://{message.source_crew_id}/{message.source_agent_id}"
    return f"crew://{message.source_crew_id}"


def encode(
    message: Message,
    *,
    kind: str,
    to: str,
    sender: str,
    expires_at_ms: int,
    retain: tuple[CrewId | None, str] | None = None,
    receipt: bool = False,
) -> tuple[dict[str, object], bytes]:
    """The unsigned headers and the body of ``message`` (sign the headers with the
    fleet's ``Signer``). ``to`` is the routing key it is published with; ``receipt``
    asks the receiving gateway for a DELIVERED receipt."""
    if kind not in KINDS:
        raise ValueError(f"unknown envelope kind {kind!r}; one of {KINDS}")
    fields: dict[str, Any] = _CONVERTER.unstructure(message)
    payload: bytes = fields.pop("body")
    meta = {
        "v": ENVELOPE_VERSION,
        "kind": kind,
        "retain": None if retain is None else [None if retain[0] is None else str(retain[0]), retain[1]],
        "message": fields,
    }
    if receipt:
        meta["receipt"] = True
    body = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode() + b"\n" + payload
    headers: dict[str, object] = {"message_id": str(message.id), "from": sender, "to": to, "expires_at": expires_at_ms}
    return headers, body


def decode(headers: Mapping[str, object], body: bytes) -> Envelope:
    """The envelope of an AMQP message (its signature is checked by the fleet's
    ``Verifier``, not here). ``SignatureError`` if the body is not an envelope of this
    version or disagrees with its signed headers."""
    line, newline, payload = body.partition(b"\n")
    try:
        if not newline:
            raise ValueError("no header line")
        meta = json.loads(line)
        if not isinstance(meta, dict) or meta.get("v") != ENVELOPE_VERSION or meta.get("kind") not in KINDS:
            raise ValueError("envelope version or kind not understood")
        message = _CONVERTER.structure({**meta["message"], "body": payload}, Message)
        if str(headers.get("message_id")) != message.id:
            raise ValueError("the body's message id differs from the signed header's")
        retained = meta.get("retain")
        retain = None
        if retained is not None:
            scope = retained[0]
            retain = (None if scope is None else CrewId(str(scope)), str(retained[1]))
        return Envelope(
            message,
            str(meta["kind"]),
            int(str(headers["expires_at"])),
            str(headers["host"]),
            retain,
            receipt=meta.get("receipt") is True,
        )
    except (ValueError, KeyError, TypeError, IndexError, InvalidArgumentError, cattrs.BaseValidationError) as exc:
        raise SignatureError(f"not a readable orkeon envelope ({exc}): refused") from exc


RECEIPT_KIND: Final = "receipt"
_RECEIPT_PREFIX: Final = b'{"delivered":'
"""How a receipt's canonical line begins (its keys sorted), and no envelope's does."""


@attrs.frozen
class Receipt:
    """A DELIVERED receipt: post ``message_id`` is held durably in ``mailbox`` on
    ``host`` (the receiving host, whose gateway signed the receipt)."""

    message_id: str
    mailbox: str
    host: str


def encode_receipt(
    message_id: str, mailbox: str, *, sender: str, to: str, expires_at_ms: int
) -> tuple[dict[str, object], bytes]:
    """The unsigned headers and the body of the receipt of post ``message_id``, held in
    ``mailbox``; ``sender`` is the receiving gateway's entity, ``to`` the routing key it
    is published with (the poster's host's answers key)."""
    line = {"v": ENVELOPE_VERSION, "kind": RECEIPT_KIND, "delivered": message_id, "mailbox": mailbox}
    body = json.dumps(line, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    headers: dict[str, object] = {
        "message_id": f"{message_id}.delivered",
        "from": sender,
        "to": to,
        "expires_at": expires_at_ms,
    }
    return headers, body


def is_receipt(body: bytes) -> bool:
    """Whether ``body`` is a receipt's (not an envelope's); it still has to verify."""
    return body.startswith(_RECEIPT_PREFIX)


def decode_receipt(headers: Mapping[str, object], body: bytes) -> Receipt:
    """The receipt in an AMQP message (its signature is checked by the ``Verifier``).
    ``SignatureError`` if it is not a receipt of this version or disagrees with its
    signed headers."""
    try:
        line = json.loads(body.partition(b"\n")[0])
        if not isinstance(line, dict) or line.get("v") != ENVELOPE_VERSION or line.get("kind") != RECEIPT_KIND:
            raise ValueError("receipt version or kind not understood")
        delivered, mailbox = str(line["delivered"]), str(line["mailbox"])
        if str(headers.get("message_id")) != f"{delivered}.delivered":
            raise ValueError("the receipt's message id differs from the signed header's")
        return Receipt(delivered, mailbox, str(headers["host"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise SignatureError(f"not a readable orkeon receipt ({exc}): refused") from exc
