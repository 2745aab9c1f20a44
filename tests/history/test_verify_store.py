"""``hub.verify_sent`` on a real store file damaged behind the runtime's back: every
missing, extra, substituted, corrupt, unreadable or version-mismatched head, node, row
or intent is refused, naming the first bad position (MESSAGE-R03)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import apsw
import pytest

from .conftest import Opener

SENDER = "a/alice"
ROWS = 4
BAD = 2

Damage = Callable[[apsw.Connection], None]


def _record(conn: apsw.Connection, seq: int) -> bytes:
    row = conn.execute("SELECT record FROM sent_rows WHERE sender = ? AND seq = ?", (SENDER, seq)).fetchone()
    assert row is not None
    return bytes(row[0])


def _set_record(conn: apsw.Connection, seq: int, raw: bytes) -> None:
    conn.execute("UPDATE sent_rows SET record = ? WHERE sender = ? AND seq = ?", (raw, SENDER, seq))


def _flip(conn: apsw.Connection) -> None:
    raw = bytearray(_record(conn, BAD))
    raw[raw.index(b'"body":"') + 9] ^= 0x01  # a base64 character of the body
    _set_record(conn, BAD, bytes(raw))


def _swap(conn: apsw.Connection) -> None:
    first, other = _record(conn, BAD), _record(conn, BAD + 1)
    _set_record(conn, BAD, other)
    _set_record(conn, BAD + 1, first)


def _old_row_version(conn: apsw.Connection) -> None:
    data = json.loads(_record(conn, BAD))
    data["version"] = 99
    _set_record(conn, BAD, json.dumps(data, sort_keys=True, separators=(",", ":")).encode())


def _extra_node(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO sent_nodes (sender, seq, row_hash, link, version) VALUES (?, ?, ?, ?, 1)",
        (SENDER, ROWS + 1, bytes(32), bytes(32)),
    )


def _bad_intent(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO sent_intents (message_id, sender, recipient, idempotency_key, content, intent, created_ms)"
        " VALUES ('01JZZZZZZZZZZZZZZZZZZZZZZZ', ?, 'agent:b/bob', NULL, x'00', x'7b7d', 0)",
        (SENDER,),
    )


def _valid_intent(sender: str, version: int) -> tuple[str, bytes]:
    """The bytes of a well-formed pending post of ``sender`` to b/bob, as ``version``."""
    from orkeon_actors.history.endpoint import endpoint_of, parse_sender
    from orkeon_actors.history.records import SendKind, SentIntent
    from orkeon_actors.model.address import MailboxAddress
    from orkeon_actors.model.ids import AgentId, CrewId, MessageId
    from orkeon_actors.model.message import Message
    from orkeon_actors.wire.sent_history import intent_bytes

    to = MailboxAddress.parse("agent://b/bob")
    crew, agent = sender.split("/")
    message = Message(
        MessageId.new(), "_system.post", CrewId(crew), datetime.now(UTC), b"{}", {}, AgentId(agent), to.crew_id, to
    )
    raw = intent_bytes(SentIntent(SendKind.POST, parse_sender(f"agent://{sender}"), endpoint_of(to), None, message, 1))
    data = json.loads(raw)
    data["version"] = version
    return str(message.id), json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _pending(message_id: str, raw: bytes) -> Damage:
    def insert(conn: apsw.Connection) -> None:
        conn.execute(
            "INSERT INTO sent_intents (message_id, sender, recipient, idempotency_key, content, intent, created_ms)"
            " VALUES (?, ?, 'agent:b/bob', NULL, x'00', ?, 1)",
            (message_id, SENDER, raw),
        )

    return insert


def _edited_intent(conn: apsw.Connection) -> None:
    """A well-formed pending intent whose recipient column no longer says what its
    bytes say (a keyed retry would look it up under the wrong recipient)."""
    message_id, raw = _valid_intent(SENDER, 2)
    _pending(message_id, raw)(conn)
    conn.execute("UPDATE sent_intents SET recipient = 'agent:b/eve' WHERE message_id = ?", (message_id,))


DAMAGES: dict[str, tuple[Damage, int, str]] = {
    "intent of another version": (_pending(*_valid_intent(SENDER, 99)), ROWS + 1, "version 99"),
    "intent of another sender": (_pending(*_valid_intent("z/zoe", 2)), ROWS + 1, "names sender z/zoe"),
    "edited recipient column": (
        lambda c: c.execute(
            "UPDATE sent_rows SET recipient = 'agent:b/eve' WHERE sender = ? AND seq = ?", (SENDER, BAD)
        ),
        BAD,
        "recipient column",
    ),
    "edited time column": (
        lambda c: c.execute("UPDATE sent_rows SET sent_ms = sent_ms + 1 WHERE sender = ? AND seq = ?", (SENDER, BAD)),
        BAD,
        "sent_ms column",
    ),
    "edited key column": (
        lambda c: c.execute("UPDATE sent_rows SET idempotency_key = 'k' WHERE sender = ? AND seq = ?", (SENDER, BAD)),
        BAD,
        "idempotency_key column",
    ),
    "edited message id column": (
        lambda c: c.execute("UPDATE sent_rows SET message_id = 'x' WHERE sender = ? AND seq = ?", (SENDER, BAD)),
        BAD,
        "names sender",
    ),
    "edited content column": (
        lambda c: c.execute("UPDATE sent_rows SET content = x'01' WHERE sender = ? AND seq = ?", (SENDER, BAD)),
        BAD,
        "content column",
    ),
    "intent with an edited recipient column": (_edited_intent, ROWS + 1, "recipient column"),
    "missing node": (
        lambda c: c.execute("DELETE FROM sent_nodes WHERE sender = ? AND seq = ?", (SENDER, BAD)),
        BAD,
        "node is missing",
    ),
    "missing row": (
        lambda c: c.execute("DELETE FROM sent_rows WHERE sender = ? AND seq = ?", (SENDER, BAD)),
        BAD,
        "row is missing",
    ),
    "corrupt row": (_flip, BAD, "does not match its node"),
    "substituted rows": (_swap, BAD, ""),
    "row of another version": (_old_row_version, BAD, "version 99"),
    "unreadable row": (lambda c: _set_record(c, BAD, b"\xff\x00not json"), BAD, "not JSON"),
    "node of another version": (
        lambda c: c.execute("UPDATE sent_nodes SET version = 9 WHERE sender = ? AND seq = ?", (SENDER, BAD)),
        BAD,
        "version 9",
    ),
    "corrupt link": (
        lambda c: c.execute("UPDATE sent_nodes SET link = ? WHERE sender = ? AND seq = ?", (bytes(32), SENDER, BAD)),
        BAD,
        "link",
    ),
    "missing head": (lambda c: c.execute("DELETE FROM sent_heads WHERE sender = ?", (SENDER,)), 0, "head is missing"),
    "head of another version": (
        lambda c: c.execute("UPDATE sent_heads SET version = 7 WHERE sender = ?", (SENDER,)),
        0,
        "version 7",
    ),
    "unreadable head": (
        lambda c: c.execute("UPDATE sent_heads SET tip = x'00' WHERE sender = ?", (SENDER,)),
        0,
        "unreadable",
    ),
    "head short of the ledger": (
        lambda c: c.execute("UPDATE sent_heads SET count = count - 1 WHERE sender = ?", (SENDER,)),
        0,
        "tip does not commit",
    ),
    "extra node past the head": (_extra_node, ROWS + 1, "past the head"),
    "unreadable intent": (_bad_intent, ROWS + 1, "intent"),
}


@pytest.fixture
def damaged_store(open_store: Opener, store_path: Path) -> Callable[[Damage], Opener]:
    rt = open_store()
    rt.hub.register_mailbox("agent://b/bob")
    alice = rt.hub.bind("a", "alice")
    for i in range(ROWS):
        alice.post("agent://b/bob", {"i": i, "text": "hello there"})
    assert rt.hub.verify_sent("agent://a/alice").ok
    rt.stop()

    def damage(apply: Damage) -> Opener:
        conn = apsw.Connection(str(store_path))
        try:
            with conn:
                apply(conn)
        finally:
            conn.close()
        return open_store

    return damage


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_each_damage_is_refused_at_its_first_bad_position(name: str, damaged_store: Callable[[Damage], Opener]) -> None:
    apply, first_bad, problem = DAMAGES[name]
    rt = damaged_store(apply)()
    report = rt.hub.verify_sent("agent://a/alice")
    assert not report.ok, report
    assert report.first_bad == first_bad, report
    assert problem in str(report.problem), report


def test_an_intent_duplicating_a_completed_row_is_cleanup_state(open_store: Opener, store_path: Path) -> None:
    rt = open_store()
    rt.hub.register_mailbox("agent://b/bob")
    posted = rt.hub.bind("a", "alice").post("agent://b/bob", "once")
    rt.stop()
    from orkeon_actors.history.endpoint import endpoint_of, parse_sender
    from orkeon_actors.history.records import SendKind, SentIntent
    from orkeon_actors.wire.sent_history import content_digest, intent_bytes

    assert posted.target_mailbox is not None
    intent = SentIntent(
        SendKind.POST, parse_sender("agent://a/alice"), endpoint_of(posted.target_mailbox), None, posted, 1
    )
    conn = apsw.Connection(str(store_path))
    conn.execute(
        "INSERT INTO sent_intents (message_id, sender, recipient, idempotency_key, content, intent, created_ms)"
        " VALUES (?, ?, ?, NULL, ?, ?, 1)",
        (posted.id, SENDER, intent.to.key, content_digest(SendKind.POST, intent.to, posted), intent_bytes(intent)),
    )
    conn.close()
    from orkeon_actors.history.view import CoverageState
    from orkeon_actors.store.sent_reads import read_history

    reader = apsw.Connection(str(store_path), flags=apsw.SQLITE_OPEN_READONLY)
    left = read_history(reader, parse_sender("agent://a/alice"))
    reader.close()
    assert (left.coverage.state, left.coverage.pending, len(left.rows)) == (CoverageState.COMPLETE, 0, 1)
    again = open_store()  # the boot removes it
    assert again.hub.verify_sent("agent://a/alice").ok
    check = apsw.Connection(str(store_path), flags=apsw.SQLITE_OPEN_READONLY)
    assert check.execute("SELECT count(*) FROM sent_intents").fetchone() == (0,)
    check.close()
