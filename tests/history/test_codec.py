"""The history's one wire format (MESSAGE-R04): rows and intents round-trip exactly,
absent and empty metadata and body stay distinct, the canonical bytes are stable, and
a record of another version is refused, never guessed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import attrs
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
    sent_history_converter,
)

texts = st.text(min_size=1, max_size=12)
metadata = st.none() | st.dictionaries(texts, st.text(max_size=12), max_size=3)
bodies = st.none() | st.binary(max_size=40)
endpoints = st.builds(Endpoint, st.sampled_from(list(EndpointKind)), texts, texts, st.none() | texts)
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
def test_the_canonical_bytes_are_the_converters_form_byte_for_byte(record: SentRecord) -> None:
    data = sent_history_converter().unstructure(record)
    for absent in ("metadata", "body"):
        if data[absent] is None:
            del data[absent]
    reference = json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode("utf-8")
    assert record_bytes(record) == reference


@given(record=records)
def test_absent_and_empty_metadata_and_body_are_different_bytes(record: SentRecord) -> None:
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
        (b'{"version": 3}', "version 3"),
        (b'{"version": true}', "version True"),
        (json.dumps({"version": RECORD_VERSION}).encode(), "do not hold"),
    ],
)
def test_bytes_that_are_not_a_known_record_are_refused(raw: bytes, problem: str) -> None:
    with pytest.raises(SentRecordError, match=problem):
        record_from_bytes(raw)


# A row exactly as the release before endpoint names wrote it (version 1).
V1_ROW = (
    b'{"body":"eyJuIjoxfQ==","correlation_id":null,"idempotency_key":"k1","kind":"post",'
    b'"message_id":"01JQ0000000000000000000000","metadata":{"p":"h"},"schema_id":"none",'
    b'"sender":{"address":"agent://a/alice","id":"a/alice","kind":"agent"},"sent_at_ms":1767225600123,'
    b'"to":{"address":"agent://b/bob","id":"b/bob","kind":"agent"},"topic":"_system.post","version":1}'
)


def test_a_version_1_row_still_reads_without_names_and_keeps_its_bytes() -> None:
    record = record_from_bytes(V1_ROW)
    assert record.version == 1 and record.sender.name is None and record.to.name is None
    assert (record.sender.id, record.to.id, record.idempotency_key) == ("a/alice", "b/bob", "k1")
    assert record_bytes(record) == V1_ROW  # what its ledger node hashes still verifies


def test_a_name_is_written_only_when_there_is_one_and_only_from_version_2() -> None:
    record = record_from_bytes(V1_ROW)
    named = attrs.evolve(
        record, version=RECORD_VERSION, sender=attrs.evolve(record.sender, name="sales-team"), to=record.to
    )
    data = json.loads(record_bytes(named))
    assert data["version"] == RECORD_VERSION == 2
    assert data["sender"]["name"] == "sales-team" and "name" not in data["to"]
    assert record_from_bytes(record_bytes(named)) == named
    forged = json.loads(V1_ROW)
    forged["sender"]["name"] = "sales-team"
    with pytest.raises(SentRecordError, match="version 1, whose endpoints have no name"):
        record_from_bytes(json.dumps(forged, sort_keys=True, separators=(",", ":")).encode())
