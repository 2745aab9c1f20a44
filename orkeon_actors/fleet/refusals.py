"""What a gateway refuses goes to ``fleet.dlx`` with why, signed by the refusing host
(cross-host messaging design, §10.1).

A gateway does not ``basic_reject`` what it refuses: a topic or answers queue has no
dead-letter exchange (a rejected delivery there would vanish while the log said it was
dead-lettered), and a rejection carries no reason, so the dead-letter reporter could not
tell an honest sender's failed post from a captured copy an attacker replayed into
another inbox. Instead :func:`refusal_copy` builds a copy of the delivery for ``fleet.dlx``
(its headers and body unchanged) with these headers added:

* ``x-orkeon-refused-by``: the refusing host;
* ``x-orkeon-refused-on``: the queue it was refused on;
* ``x-orkeon-refusal``: the reason (the error's type and message);
* ``x-orkeon-report``: ``"true"`` when the sender should hear of it (the recipient's
  host could not take a genuine message: its mailbox closed, its ACL refused it, it
  expired unseen), ``"false"`` for a security refusal (forged, replayed, misrouted,
  impersonating, or whose sender's presence never came): the copy the sender published
  was delivered, or never was its own;
* ``x-orkeon-refusal-signature``: the refusing host's HMAC over those fields, the message
  id and the body (:func:`refusal_of` checks it: a party with broker access cannot
  forge a refusal that makes the reporter write into a mailbox).

The gateway acknowledges the delivery once the broker confirmed the copy (with the
broker unreachable it rejects it instead, which an inbox's dead-letter exchange still
catches).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from orkeon_actors.errors import SignatureError
from orkeon_actors.fleet.signing import SIGNATURE_HEADER, Signer, Verifier
from orkeon_actors.hub.amqp.link import Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import DLX

__all__ = [
    "REFUSAL",
    "REFUSAL_SIGNATURE",
    "REFUSED_BY",
    "REFUSED_ON",
    "REPORT",
    "Refusal",
    "refusal_copy",
    "refusal_of",
]

REFUSED_BY: Final = "x-orkeon-refused-by"
REFUSED_ON: Final = "x-orkeon-refused-on"
REFUSAL: Final = "x-orkeon-refusal"
REPORT: Final = "x-orkeon-report"
REFUSAL_SIGNATURE: Final = "x-orkeon-refusal-signature"
_FIELDS: Final = (REFUSED_BY, REFUSED_ON, REFUSAL, REPORT, REFUSAL_SIGNATURE)


@attrs.frozen
class Refusal:
    """A gateway's signed refusal of one delivery."""

    host: str
    queue: str
    reason: str
    report: bool


def _signed_form(message_id: str, refusal: Refusal, body: bytes) -> tuple[dict[str, object], bytes]:
    """The refusal as the signing module's headers and body, so the host's key signs it
    with the same canonical form as its messages."""
    headers: dict[str, object] = {
        "message_id": message_id,
        "from": f"refusal:{'report' if refusal.report else 'silent'}",
        "to": refusal.queue,
        "host": refusal.host,
        "expires_at": 0,
    }
    return headers, refusal.reason.encode() + b"\n" + body


def refusal_copy(delivery: Delivery, reason: str, *, report: bool, signer: Signer) -> Outgoing:
    """The copy of ``delivery`` for ``fleet.dlx``, refused by ``signer``'s host."""
    message_id = str(delivery.headers.get("message_id", delivery.message_id or ""))
    refusal = Refusal(signer.host, delivery.queue, reason, report)
    signed = signer.sign(*_signed_form(message_id, refusal, delivery.body))
    headers: dict[str, Any] = {name: value for name, value in delivery.headers.items() if name not in _FIELDS}
    headers.update(
        {
            REFUSED_BY: refusal.host,
            REFUSED_ON: refusal.queue,
            REFUSAL: reason,
            REPORT: "true" if report else "false",
            REFUSAL_SIGNATURE: signed[SIGNATURE_HEADER],
        }
    )
    return Outgoing(
        DLX, delivery.routing_key, delivery.body, delivery.message_id or message_id, headers, mandatory=False
    )


def refusal_of(headers: Mapping[str, Any], body: bytes, verifier: Verifier) -> Refusal | None:
    """The refusal a dead letter carries, its signature checked; ``None`` for one the
    broker dead-lettered itself (no refusal headers). ``SignatureError`` for a refusal
    no fleet host signed."""
    if REFUSED_BY not in headers:
        return None
    text = {name: _text(headers.get(name, "")) for name in _FIELDS}
    refusal = Refusal(text[REFUSED_BY], text[REFUSED_ON], text[REFUSAL], text[REPORT] == "true")
    form, signed_body = _signed_form(_text(headers.get("message_id", "")), refusal, body)
    form[SIGNATURE_HEADER] = text[REFUSAL_SIGNATURE]
    host = verifier.signer_of(form, signed_body)
    if host != refusal.host:  # signer_of reads the host from the form: cannot differ
        raise SignatureError(f"a refusal claimed by {refusal.host!r} was signed by {host!r}")
    return refusal


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
