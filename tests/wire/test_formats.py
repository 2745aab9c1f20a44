"""The wire formats: every format round-trips every message, each keeps its datetime
rule, and ``Message``'s named constructors keep every field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.wire.amqp import amqp_envelope_converter
from orkeon_actors.wire.base import base_converter
from orkeon_actors.wire.snapshot import SNAPSHOT_DATETIMES, snapshot_converter
from orkeon_actors.wire.store_row import ENVELOPE_COLUMNS, STORE_DATETIMES, envelope, envelope_columns, message_from_row
from orkeon_actors.wire.studio_feed import feed_message_fields, payload_preview
from orkeon_actors.wire.tool_json import TOOL_DATETIMES, check_envelope_class, tool_json_converter
from tests.tools.test_converter import messages

FIELDS = [f.name for f in attrs.fields(ok.Message)]


@settings(max_examples=60, deadline=None)
@given(messages())
def test_the_snapshot_format_round_trips_a_message_through_json(message: ok.Message) -> None:
    converter = snapshot_converter()
    data = json.loads(json.dumps(converter.unstructure(message)))
    defaults = {f.name for f in attrs.fields(ok.Message) if getattr(message, f.name) == f.default}
    assert set(data) == set(FIELDS) - defaults  # a field equal to its default is left out
    assert {"id", "topic", "source_crew_id", "published_at"} <= set(data)  # no default: always written
    assert converter.structure(data, ok.Message) == message


@settings(max_examples=60, deadline=None)
@given(messages())
def test_the_store_row_round_trips_a_message_column_by_column(message: ok.Message) -> None:
    row = envelope(message)
    assert len(row) == len(ENVELOPE_COLUMNS)
    assert all(value is None or isinstance(value, (str, bytes)) for value in row)
    assert message_from_row(row) == message


@settings(max_examples=60, deadline=None)
@given(messages())
def test_the_amqp_envelope_round_trips_a_message_with_its_payload_as_the_body(message: ok.Message) -> None:
    converter = amqp_envelope_converter()
    data = converter.unstructure(message)
    assert data["body"] == message.payload
    assert set(data) == (set(FIELDS) - {"payload"}) | {"body"}
    assert converter.structure(data, ok.Message) == message


def test_each_format_states_its_datetime_rule() -> None:
    instant = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    paris = instant.astimezone(timezone(timedelta(hours=1)))
    assert SNAPSHOT_DATETIMES.format(paris) == "2026-01-02T03:04:05.000006Z"  # what a person reads
    assert SNAPSHOT_DATETIMES.parse("2026-01-02T03:04:05.000006+00:00") == instant  # earlier snapshots load
    assert STORE_DATETIMES.format(paris) == "2026-01-02T03:04:05.000006Z"
    assert TOOL_DATETIMES.format(paris) == "2026-01-02T03:04:05.000006Z"
    assert STORE_DATETIMES.parse("2026-01-02T03:04:05.000006") == instant  # naive text is UTC in the store
    with pytest.raises(ValueError, match="no UTC offset"):
        TOOL_DATETIMES.parse("2026-01-02T03:04:05.000006")  # a model must give the zone
    for rule in (SNAPSHOT_DATETIMES, STORE_DATETIMES, TOOL_DATETIMES):
        assert rule.parse(rule.format(instant)) == instant
    with pytest.raises(ValueError, match="aware"):
        STORE_DATETIMES.format(instant.replace(tzinfo=None))


def test_the_base_converter_validates_ids_addresses_and_metadata() -> None:
    converter = base_converter(TOOL_DATETIMES)
    assert converter.structure("_system", ok.CrewId) is ok.CrewId.SYSTEM
    with pytest.raises(ok.errors.InvalidIdError):
        converter.structure("not a ULID", ok.MessageId)
    with pytest.raises(ok.errors.InvalidArgumentError, match="strings"):
        converter.structure({"k": 1}, ok.model.message.FrozenMap)
    with pytest.raises(TypeError, match="got array"):
        converter.structure(["k"], ok.model.message.FrozenMap)
    assert converter.unstructure(ok.MailboxAddress.parse("agent://a/b")) == "agent://a/b"


def test_the_tool_format_refuses_an_envelope_class_missing_a_message_field() -> None:
    @attrs.frozen
    class Partial:
        id: str
        payload: str
        payload_encoding: str

    with pytest.raises(TypeError, match="missing"):
        check_envelope_class(Partial)
    with pytest.raises(TypeError, match="missing"):
        tool_json_converter(Partial)


@settings(max_examples=60, deadline=None)
@given(messages(), st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3))
def test_with_metadata_keeps_every_field_and_merges_the_metadata(message: ok.Message, extra: dict[str, str]) -> None:
    copy = message.with_metadata(extra)
    assert copy == attrs.evolve(message, metadata={**message.metadata, **extra})
    assert all(getattr(copy, name) == getattr(message, name) for name in FIELDS if name != "metadata")
    with pytest.raises(ok.errors.InvalidArgumentError):
        message.with_metadata({"k": 1})  # type: ignore[dict-item]


def test_a_timed_out_message_is_the_systems_and_names_the_wait() -> None:
    started = datetime(2026, 1, 1, tzinfo=UTC)
    message_id = ok.MessageId.new()
    message = ok.Message.wait_timed_out(
        message_id=message_id,
        at=started + timedelta(seconds=5),
        original_topic="orders.created",
        wait_id="w1",
        started_at=started,
        target_crew_id=ok.CrewId("billing"),
    )
    assert message.is_timeout
    assert message.id == message_id
    assert message.topic == ok.WAIT_TIMED_OUT_TOPIC
    assert message.source_crew_id is ok.CrewId.SYSTEM
    assert message.target_crew_id == "billing"
    assert message.payload == b""
    assert dict(message.metadata) == {
        "original_topic": "orders.created",
        "original_wait_id": "w1",
        "original_started_at": "2026-01-01T00:00:00.000000Z",  # fixed-width RFC 3339 UTC
    }


@settings(max_examples=40, deadline=None)
@given(messages())
def test_the_store_row_columns_by_name_are_the_envelope(message: ok.Message) -> None:
    columns = envelope_columns(message)
    assert set(columns) == set(ENVELOPE_COLUMNS)
    assert tuple(columns[name] for name in ENVELOPE_COLUMNS) == envelope(message)


def test_the_studio_feed_shows_parties_and_a_cut_preview_not_metadata() -> None:
    message = ok.Message(
        ok.MessageId.new(),
        "orders.created",
        ok.CrewId("shop"),
        datetime(2026, 1, 1, 12, tzinfo=UTC),
        "é".encode() * 200,
        {"secret": "x"},
        source_agent_id=ok.AgentId("clerk"),
        target_mailbox=ok.MailboxAddress.parse("agent://billing/scorer"),
    )
    fields = feed_message_fields(message)
    assert fields == {
        "message_id": str(message.id),
        "topic": "orders.created",
        "crew": "shop",
        "agent": "clerk",
        "to_crew": None,
        "to": "agent://billing/scorer",
        "correlation_id": None,
        "published_at": "2026-01-01T12:00:00.000000Z",
        "payload": "é" * 120 + "…",
    }
    assert payload_preview(b"\xff") == "\ufffd"  # invalid UTF-8 is replaced, never raised
