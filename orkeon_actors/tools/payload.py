"""Payload bytes as a model sees them: the tool JSON format's payload rule, defined in
:mod:`orkeon_actors.wire.payload` (the wire formats' owner) and re-exported here."""

from orkeon_actors.wire.payload import PAYLOAD_ENCODINGS, PayloadEncoding, decode_payload, encode_decoded_payload

__all__ = ["PAYLOAD_ENCODINGS", "PayloadEncoding", "decode_payload", "encode_decoded_payload"]
