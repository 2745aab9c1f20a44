"""The AMQP envelope carries every field of a message unchanged, and refuses a body that
is not one (the gateway then dead-letters it); a DELIVERED receipt is told apart from an
envelope and names the post it confirms."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orkeon_actors.errors import SignatureError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.wire.amqp import Receipt, decode, decode_receipt, encode, encode_receipt, is_receipt, sender_of

ids = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    crew = draw(st.one_of(st.just(CrewId.SYSTEM), ids.map(CrewId)))
    target = draw(st.one_of(st.none(), st.tuples(ids, ids).map(lambda t: MailboxAddress.agent(*t))))
    return Message(
        MessageId.new(),
        draw(st.from_regex(r"[a-z]+(\.[a-z]+){0,3}", fullmatch=True)),
        crew,
        draw(st.datetimes(timezones=st.just(UTC), min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1))),
        draw(st.binary(max_size=64)),
        draw(st.dictionaries(ids, texts, max_size=3)),
        draw(st.one_of(st.none(), ids.map(AgentId))),
        None if target is None else target.crew_id,
        target,
        draw(st.one_of(st.none(), st.builds(CorrelationId.new))),
        draw(ids),
    )


@given(
    messages(),
    st.sampled_from(["post", "topic", "answer"]),
    st.one_of(st.none(), st.tuples(st.none(), ids)),
    st.booleans(),
)
def test_a_message_survives_the_envelope_unchanged(message: Message, kind: str, retain: object, receipt: bool) -> None:
    headers, body = encode(
        message,
        kind=kind,
        to="mbox.x",
        sender="crew://s",
        expires_at_ms=123,
        retain=retain,  # type: ignore[arg-type]
        receipt=receipt,
    )
    envelope = decode({**headers, "host": "h"}, body)
    assert envelope.message == message
    assert (envelope.kind, envelope.expires_at_ms, envelope.host, envelope.retain) == (kind, 123, "h", retain)
    assert envelope.receipt is receipt and not is_receipt(body)


def test_a_receipt_names_the_post_it_confirms_and_is_no_envelope() -> None:
    message_id = str(MessageId.new())
    headers, body = encode_receipt(
        message_id, "agent://ledger/book", sender="_gateway@b", to="answer.a", expires_at_ms=9
    )
    assert is_receipt(body) and headers["message_id"] == f"{message_id}.delivered"
    assert decode_receipt({**headers, "host": "b"}, body) == Receipt(message_id, "agent://ledger/book", "b")
    with pytest.raises(SignatureError, match="not a readable orkeon envelope"):
        decode({**headers, "host": "b"}, body)
    with pytest.raises(SignatureError, match="differs from the signed header"):
        decode_receipt({**headers, "message_id": "other.delivered", "host": "b"}, body)


def test_the_sender_is_the_agent_else_the_crew_else_the_gateway() -> None:
    now = datetime.now(UTC)
    agent = Message(MessageId.new(), "t", CrewId("c"), now, source_agent_id=AgentId("a"))
    crew = Message(MessageId.new(), "t", CrewId("c"), now)
    system = Message(MessageId.new(), "t", CrewId.SYSTEM, now)
    assert [sender_of(m, "_gateway@h") for m in (agent, crew, system)] == ["agent://c/a", "crew://c", "_gateway@h"]


@pytest.mark.parametrize(
    "body", [b"no newline", b'{"v": 99, "kind": "post"}\n', b"not json\npayload", b'{"v": 1, "kind": "spam"}\n']
)
def test_a_body_that_is_not_an_envelope_is_refused(body: bytes) -> None:
    with pytest.raises(SignatureError, match="not a readable orkeon envelope"):
        decode({"message_id": "x", "expires_at": 1, "host": "h"}, body)


def test_a_body_whose_id_differs_from_the_signed_header_is_refused() -> None:
    message = Message(MessageId.new(), "t", CrewId("c"), datetime.now(UTC))
    headers, body = encode(message, kind="topic", to="topic.t", sender="crew://c", expires_at_ms=1)
    with pytest.raises(SignatureError, match="differs"):
        decode({**headers, "message_id": str(MessageId.new()), "host": "h"}, body)
