"""Signed cross-host messages: only the signing host's key verifies, nothing signed can
change, and the sender, recipient, expiry and replay checks refuse in order."""

from __future__ import annotations

import json
import secrets

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orkeon_actors.errors import InvalidArgumentError, SignatureError
from orkeon_actors.fleet.signing import SIGNED_HEADERS, HostKeys, Signer, Verifier, canonical_bytes

KEYS = HostKeys({"host-a": secrets.token_bytes(32), "host-b": secrets.token_bytes(32)})
NOW = 1_800_000_000_000
HOMES = {"agent://billing/scorer": "host-a", "agent://fraud/checker": "host-b"}


def _headers(**overrides: object) -> dict[str, object]:
    headers: dict[str, object] = {
        "message_id": "01JTESTMESSAGE",
        "from": "agent://billing/scorer",
        "to": "agent://fraud/checker",
        "expires_at": NOW + 60_000,
    }
    headers.update(overrides)
    return headers


def _verifier() -> Verifier:
    return Verifier(KEYS, HOMES.get, lambda: NOW, seen=3)


def test_a_signed_message_verifies_once_then_is_a_duplicate() -> None:
    signed = Signer("host-a", KEYS).sign(_headers(), b'{"n":1}')
    verifier = _verifier()
    assert verifier.verify(signed, b'{"n":1}', "agent://fraud/checker") is True
    # the same signed bytes again (a republish, a redelivery): a duplicate, not a replay
    assert verifier.verify(signed, b'{"n":1}', "agent://fraud/checker") is False
    # the same message signed again by its host with a fresh expiry (an outbox retry)
    resigned = Signer("host-a", KEYS).sign(_headers(expires_at=NOW + 90_000), b'{"n":1}')
    assert verifier.verify(resigned, b'{"n":1}', "agent://fraud/checker") is False


def test_other_content_under_a_seen_id_is_a_replay() -> None:
    verifier = _verifier()
    verifier.verify(Signer("host-a", KEYS).sign(_headers(), b'{"n":1}'), b'{"n":1}', "agent://fraud/checker")
    other = Signer("host-a", KEYS).sign(_headers(), b'{"n":2}')
    with pytest.raises(SignatureError, match="already received with other content: a replay"):
        verifier.verify(other, b'{"n":2}', "agent://fraud/checker")


@given(header=st.sampled_from(SIGNED_HEADERS), value=st.text(min_size=1, max_size=20))
def test_changing_any_signed_header_breaks_the_signature(header: str, value: str) -> None:
    signed = Signer("host-a", KEYS).sign(_headers(), b"body")
    if str(signed[header]) == value:
        return
    tampered = dict(signed, **{header: value})
    with pytest.raises(SignatureError):
        _verifier().verify(tampered, b"body", "agent://fraud/checker")


@given(body=st.binary(max_size=64), flip=st.integers(min_value=0))
def test_changing_any_body_byte_breaks_the_signature(body: bytes, flip: int) -> None:
    signed = Signer("host-a", KEYS).sign(_headers(), body)
    changed = bytearray(body + b"x")
    changed[flip % len(changed)] ^= 0x01
    with pytest.raises(SignatureError, match="bad signature"):
        _verifier().verify(signed, bytes(changed), "agent://fraud/checker")


def test_another_hosts_key_does_not_verify() -> None:
    forged = Signer("host-b", KEYS).sign(_headers(), b"x")
    forged["host"] = "host-a"
    with pytest.raises(SignatureError, match="bad signature"):
        _verifier().verify(forged, b"x", "agent://fraud/checker")


def test_a_sender_that_does_not_live_on_the_signing_host_is_refused() -> None:
    signed = Signer("host-b", KEYS).sign(_headers(), b"x")  # host-b claims billing's scorer
    with pytest.raises(SignatureError, match="lives on 'host-a' by presence, but host 'host-b' signed"):
        _verifier().verify(signed, b"x", "agent://fraud/checker")


def test_a_message_replayed_into_another_inbox_is_refused() -> None:
    signed = Signer("host-a", KEYS).sign(_headers(), b"x")
    with pytest.raises(SignatureError, match="arrived keyed for agent://other/inbox"):
        _verifier().verify(signed, b"x", "agent://other/inbox")


def test_an_expired_message_is_refused() -> None:
    signed = Signer("host-a", KEYS).sign(_headers(expires_at=NOW), b"x")
    with pytest.raises(SignatureError, match="expired"):
        _verifier().verify(signed, b"x", "agent://fraud/checker")


def test_an_unknown_host_and_missing_headers_are_refused() -> None:
    with pytest.raises(SignatureError, match="unknown host 'host-z'"):
        _verifier().verify(_headers(host="host-z", signature="00"), b"x", "agent://fraud/checker")
    partial = _headers(host="host-a", signature="00")
    del partial["expires_at"]
    with pytest.raises(SignatureError, match="lacks the signed header"):
        _verifier().verify(partial, b"x", "agent://fraud/checker")


def test_the_replay_window_is_bounded() -> None:
    verifier = _verifier()  # remembers the last 3 ids
    for n in range(5):
        verifier.verify(Signer("host-a", KEYS).sign(_headers(message_id=f"m{n}"), b"x"), b"x", "agent://fraud/checker")
    # m0 left the window: only its expiry still bounds a replay of it
    other = Signer("host-a", KEYS).sign(_headers(message_id="m0"), b"y")
    assert verifier.verify(other, b"y", "agent://fraud/checker") is True


def test_keys_must_be_long_and_present() -> None:
    with pytest.raises(InvalidArgumentError, match="at least 32 random bytes"):
        HostKeys({"h": b"short"})
    with pytest.raises(InvalidArgumentError, match="no signing key for this host 'host-z'"):
        Signer("host-z", KEYS)


@given(st.dictionaries(st.sampled_from(SIGNED_HEADERS), st.text() | st.integers(), min_size=len(SIGNED_HEADERS)))
def test_the_canonical_form_is_the_sorted_compact_json_other_hosts_sign(headers: dict[str, object]) -> None:
    """A fleet whose hosts run different versions still verifies: the signed bytes are
    exactly the sorted, compact JSON (ASCII escapes) of the signed headers as strings."""
    signed = {name: str(headers[name]) for name in SIGNED_HEADERS}
    expected = json.dumps(signed, sort_keys=True, separators=(",", ":")).encode() + b"\n" + b"body"
    assert canonical_bytes({**headers, "signature": "ignored"}, b"body") == expected
