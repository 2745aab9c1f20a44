"""The history's one wire format (MESSAGE-R04): rows and intents round-trip exactly,
absent and empty metadata and body stay distinct, the canonical bytes are stable, and
a record of another version is refused, never guessed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.history.endpoint import Endpoint, EndpointKind, parse_sender
from orkeon_actors.history.records import RECORD_VERSION, SendKind, SentIntent, SentRecord
from orkeon_actors.model.ids import MessageId
from orkeon_actors.wire.sent_history import (
    SentRecordError,
    intent_bytes,
    intent_from_bytes,
    record_bytes,
    record_from_bytes,
)

texts = st.text(min_size=1, max_size=12)
metadata = st.none() | st.dictionaries(texts, st.text(max_size=12), max_size=3)
bodies = st.none() | st.binary(max_size=40)
endpoints = st.builds(Endpoint, st.sampled_from(list(EndpointKind)), texts, texts)
records = st.builds(
    SentRecord,
    message_id=st.just(str(MessageId.new())),
    kind=st.sampled_from(list(SendKind)),
    sender=endpoints,
    to=endpoints,
    sent_at_ms=st.integers(0, 2**48),
    topic=texts,
    correlation_id=st.none() | texts,
    idempotency_key=st.none() | texts,
    metadata=metadata,
    body=bodies,
    schema_id=texts,
)


@given(record=records)
def test_a_record_round_trips_exactly_and_its_bytes_are_canonical(record: SentRecord) -> None:
    raw = record_bytes(record)
    assert record_from_bytes(raw) == record
    assert record_bytes(record_from_bytes(raw)) == raw
    data = json.loads(raw)
    assert list(data) == sorted(data)
    assert ("metadata" in data) == (record.metadata is not None)
    assert ("body" in data) == (record.body is not None)


@given(record=records)
def test_absent_and_empty_metadata_and_body_are_different_bytes(record: SentRecord) -> None:
    import attrs

    absent = attrs.evolve(record, metadata=None, body=None)
    empty = attrs.evolve(record, metadata={}, body=b"")
    assert record_bytes(absent) != record_bytes(empty)
    assert record_from_bytes(record_bytes(absent)).metadata is None
    assert record_from_bytes(record_bytes(empty)).metadata == {}
    assert record_from_bytes(record_bytes(empty)).body == b""


def test_an_intent_keeps_every_byte_of_its_original_message() -> None:
    message = ok.Message(
        MessageId.new(),
        "_system.send",
        ok.CrewId("a"),
        datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=UTC),
        b"\x00\xffbinary",
        {"k": "v"},
        ok.AgentId("alice"),
        ok.CrewId("b"),
        ok.MailboxAddress.parse("agent://b/bob"),
        ok.CorrelationId.new(),
        "orders.v1",
    )
    intent = SentIntent(SendKind.SEND, parse_sender("agent://a/alice"), parse_sender("agent://b/bob"), "k1", message, 7)
    assert intent_from_bytes(intent_bytes(intent)) == intent


@pytest.mark.parametrize(
    "raw, problem",
    [
        (b"\xff", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"version": 2}', "version 2"),
        (json.dumps({"version": RECORD_VERSION}).encode(), "do not hold"),
    ],
)
def test_bytes_that_are_not_a_known_record_are_refused(raw: bytes, problem: str) -> None:
    with pytest.raises(SentRecordError, match=problem):
        record_from_bytes(raw)
