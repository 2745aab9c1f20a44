"""The one cattrs converter: round trips of DTOs and messages, timestamps, envelopes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.model.message import encode_payload
from orkeon_actors.tools import (
    GetLastValueResponse,
    MessageEnvelope,
    PublishEventRequest,
    ReceiveMessageResponse,
    SendRequestRequest,
    WaitForEventRequest,
    WaitForEventResponse,
    converter,
    structure_request,
    unstructure,
)
from orkeon_actors.tools.converter import format_datetime, parse_datetime
from tests.tools.conftest import ENVELOPE_FIELDS

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,15}", fullmatch=True)
words = st.from_regex(r"[a-z0-9_-]{1,8}", fullmatch=True)
topics = st.lists(words, min_size=1, max_size=4).map(".".join)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
metadata = st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)
instants = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
addresses = st.one_of(
    st.builds(lambda c, a: f"agent://{c}/{a}", names, names),
    names.map(lambda c: f"crew://{c}"),
    topics.map(lambda t: f"topic://{t}"),
    names.map(lambda n: f"client://{n}"),
).map(ok.MailboxAddress.parse)
payload_bytes = st.one_of(json_values.map(encode_payload), st.text(max_size=20).map(str.encode), st.binary(max_size=20))


@st.composite
def messages(draw: st.DrawFn) -> ok.Message:
    mailbox = draw(st.none() | addresses)
    return ok.Message(
        ok.MessageId.new(),
        draw(topics),
        ok.CrewId(draw(names)),
        draw(instants),
        draw(payload_bytes),
        draw(metadata),
        draw(st.none() | names.map(ok.AgentId)),
        None if mailbox is None else mailbox.crew_id,
        mailbox,
        draw(st.none() | st.builds(ok.CorrelationId.new)),
        draw(st.just(ok.NO_DECLARED_SCHEMA_ID) | names),
    )


@settings(max_examples=100, deadline=None)
@given(messages())
def test_a_message_round_trips_through_its_envelope(message: ok.Message) -> None:
    wire = unstructure(message)
    assert set(wire) == ENVELOPE_FIELDS | {"payload_encoding"}
    assert json.loads(json.dumps(wire)) == wire  # plain JSON
    back = converter.structure(wire, ok.Message)
    if wire["payload_encoding"] == "json":  # JSON payloads come back in canonical form
        assert back == attrs.evolve(message, payload=encode_payload(json.loads(message.payload)))
    else:
        assert back == message


@settings(max_examples=100, deadline=None)
@given(
    topic=topics,
    payload=json_values,
    crew=st.none() | names,
    meta=st.none() | metadata,
    key=st.none() | names,
)
def test_publish_requests_round_trip(
    topic: str, payload: Any, crew: str | None, meta: dict[str, str] | None, key: str | None
) -> None:
    arguments = {
        "topic": topic,
        "payload": payload,
        "target_crew_id": crew,
        "metadata": meta,
        "retain_as_last_value": True if key else None,
        "last_value_key": key,
    }
    request = structure_request(arguments, PublishEventRequest)
    assert converter.structure(unstructure(request), PublishEventRequest) == request
    assert unstructure(request)["payload"] == payload


@settings(max_examples=100, deadline=None)
@given(address=addresses, timeout_ms=st.integers(1, 2**31 - 1), payload=json_values)
def test_send_requests_round_trip(address: ok.MailboxAddress, timeout_ms: int, payload: Any) -> None:
    wire = {
        "target_mailbox": str(address),
        "payload": payload,
        "timeout_ms": timeout_ms,
        "metadata": None,
        "idempotency_key": None,
    }
    request = structure_request(wire, SendRequestRequest)
    assert request.target_mailbox == address
    assert unstructure(request) == wire


wait_results = st.one_of(
    st.builds(lambda m: WaitForEventResponse(False, message=m), messages()),
    st.builds(
        lambda md, n: WaitForEventResponse(True, metadata=ok.model.FrozenMap(md), missed=n),
        metadata,
        st.integers(0, 5),
    ),
)


@settings(max_examples=50, deadline=None)
@given(wait_results)
def test_wait_results_round_trip_and_omit_what_does_not_apply(response: WaitForEventResponse) -> None:
    wire = unstructure(response)
    if response.timed_out:
        assert "message" not in wire and wire["metadata"] == dict(response.metadata or {})
    else:
        assert "metadata" not in wire and set(wire["message"]) >= ENVELOPE_FIELDS
    assert ("missed" in wire) == (response.missed != 0)
    back = converter.structure(wire, WaitForEventResponse)
    assert back.timed_out == response.timed_out and back.missed == response.missed


def test_receive_results_omit_what_does_not_apply() -> None:
    assert unstructure(ReceiveMessageResponse(True, metadata=ok.model.FrozenMap({"a": "b"}))) == {
        "timed_out": True,
        "metadata": {"a": "b"},
    }


def test_get_last_value_never_omits_fields() -> None:
    assert unstructure(GetLastValueResponse(False, None, None)) == {"found": False, "value": None, "set_at": None}


@given(instants)
def test_timestamps_are_iso_8601_utc_with_z(instant: datetime) -> None:
    text = format_datetime(instant)
    assert text.endswith("Z") and len(text) == len("2026-01-01T00:00:00.000000Z")
    assert parse_datetime(text) == instant


def test_other_zones_are_converted_to_utc_and_naive_datetimes_refused() -> None:
    paris = datetime(2026, 6, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert format_datetime(paris) == "2026-06-01T12:00:00.000000Z"
    with pytest.raises(ValueError):
        format_datetime(datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        parse_datetime("2026-01-01T00:00:00")


def test_envelope_fields_are_the_spec_fields_in_order() -> None:
    assert [f.name for f in attrs.fields(MessageEnvelope)] == [
        "id",
        "topic",
        "source_crew_id",
        "source_agent_id",
        "target_crew_id",
        "target_mailbox",
        "correlation_id",
        "published_at",
        "metadata",
        "payload",
        "payload_encoding",
        "schema_id",
    ]


def test_dtos_are_frozen() -> None:
    request = structure_request({"topic": "t", "timeout_ms": 5}, WaitForEventRequest)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        request.topic = "u"  # type: ignore[misc]
    response = GetLastValueResponse(False, None, None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        response.found = True  # type: ignore[misc]
