"""Payload bytes as a model sees them.

A :class:`~orkeon_actors.model.message.Message` carries bytes. Tools send JSON, so
almost every payload decodes as JSON; a payload published by Python code may be any
bytes, though, and must still reach the model faithfully. The encoding says which:

* ``json``: the payload is the decoded JSON value;
* ``text``: not JSON but valid UTF-8, given as a string (an empty payload is the empty
  string: it is not a JSON document);
* ``base64``: anything else, standard base64 with padding.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final, Literal

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.message import encode_payload
from orkeon_actors.model.strict_json import loads_strict

__all__ = ["PAYLOAD_ENCODINGS", "PayloadEncoding", "decode_payload", "encode_decoded_payload"]

PayloadEncoding = Literal["json", "text", "base64"]
PAYLOAD_ENCODINGS: Final[tuple[str, ...]] = ("json", "text", "base64")


def decode_payload(payload: bytes) -> tuple[Any, PayloadEncoding]:
    """``(value, encoding)`` for ``payload``; never raises.

    Only strict JSON (:func:`~orkeon_actors.model.strict_json.loads_strict`: bounded
    nesting, no NaN or infinities, no duplicate keys) decodes as ``json``; any other
    UTF-8 payload is handed over as ``text``, so a result is always valid JSON for the
    model whatever bytes a Python caller published."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(payload).decode("ascii"), "base64"
    try:
        return loads_strict(text), "json"
    except InvalidArgumentError:
        return text, "text"


def encode_decoded_payload(value: Any, encoding: str) -> bytes:
    """The inverse of :func:`decode_payload`: ``encode(*decode(b)) == b`` for every
    ``b`` whose JSON form is canonical (compact, as the hub writes it), text and binary
    payloads included. Raises ``InvalidArgumentError`` for an unknown encoding or a value
    that does not fit it."""
    if encoding == "json":
        return encode_payload(value)
    if encoding == "text" and isinstance(value, str):
        return value.encode("utf-8")
    if encoding == "base64" and isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise InvalidArgumentError(f"payload is not valid base64: {exc}") from None
    raise InvalidArgumentError(
        f"payload_encoding must be one of {', '.join(PAYLOAD_ENCODINGS)} with a matching payload, "
        f"got {encoding!r} with {type(value).__name__}"
    )
