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
    "coverage start moved later (hiding rows)": (
        lambda c: c.execute("UPDATE sent_index SET since_ms = since_ms + 60000"),
        1,  # the first row sent since the index really started
        "sent_index.since_ms holds",
    ),
    "coverage start moved earlier (claiming a gap)": (
        lambda c: c.execute("UPDATE sent_index SET since_ms = since_ms - 60000"),
        1,
        "sent_index.since_ms was edited",
    ),
    "coverage start moved with its epoch record": (
        lambda c: c.execute(
            "UPDATE sent_index SET since_ms = since_ms + 60000;"
            " UPDATE sent_epochs SET since_ms = since_ms + 60000 WHERE stopped_ms IS NULL"
        ),
        1,
        "no start of the index",
    ),
    "edited node epoch": (
        lambda c: c.execute(
            "UPDATE sent_nodes SET epoch_ms = epoch_ms + 1 WHERE sender = ? AND seq = ?", (SENDER, BAD)
        ),
        BAD,
        "link",
    ),
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


def test_an_edited_coverage_start_hides_rows_from_sent_but_not_from_verify(
    damaged_store: Callable[[Damage], Opener], capsys: pytest.CaptureFixture[str], store_path: Path
) -> None:
    from orkeon_actors.cli.main import main

    damaged_store(lambda c: c.execute("UPDATE sent_index SET since_ms = since_ms + 60000"))
    assert main(["message", "sent", "--id", SENDER, "--json", "--store", str(store_path)]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == []  # what the edit hides
    assert main(["message", "verify", "--id", SENDER, "--json", "--store", str(store_path)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert '"first_bad": 1' in json.dumps(report), report


def _v1_store(path: Path, rows: int) -> int:
    """A store as the release before schema version 11 wrote it: ``rows`` posts of
    a/alice to b/bob, each with a version-1 node (no epoch); returns the index start."""
    import hashlib

    from orkeon_actors.history import ledger
    from orkeon_actors.history.endpoint import endpoint_of, parse_sender
    from orkeon_actors.history.records import SendKind, SentIntent
    from orkeon_actors.model.address import MailboxAddress
    from orkeon_actors.model.ids import AgentId, CrewId, MessageId
    from orkeon_actors.model.message import Message
    from orkeon_actors.store.schema import MIGRATIONS
    from orkeon_actors.wire.sent_history import content_digest, record_bytes, record_of

    since = int(datetime.now(UTC).timestamp() * 1000) - 60_000
    conn = apsw.Connection(str(path))
    with conn:
        for step in MIGRATIONS[:10]:
            step.apply(conn)
        conn.execute("PRAGMA user_version = 10")
        conn.execute("INSERT INTO sent_index (id, since_ms) VALUES (1, ?)", (since,))
        to = MailboxAddress.parse("agent://b/bob")
        link = ledger.GENESIS
        for seq in range(1, rows + 1):
            sent = datetime.fromtimestamp((since + seq) / 1000, UTC)
            message = Message(MessageId.new(), "_system.post", CrewId("a"), sent, b"{}", {}, AgentId("alice"), None, to)
            intent = SentIntent(SendKind.POST, parse_sender("agent://a/alice"), endpoint_of(to), None, message, since)
            raw = record_bytes(record_of(intent))
            row_hash = hashlib.sha256(raw).digest()
            link = ledger.link_of(link, seq, row_hash)  # version 1: no epoch
            conn.execute(
                "INSERT INTO sent_rows VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
                (
                    SENDER,
                    seq,
                    str(message.id),
                    intent.to.key,
                    since + seq,
                    content_digest(SendKind.POST, intent.to, message),
                    raw,
                ),
            )
            conn.execute("INSERT INTO sent_nodes VALUES (?, ?, ?, ?, 1)", (SENDER, seq, row_hash, link))
        conn.execute("INSERT INTO sent_heads VALUES (?, ?, ?, ?, 1)", (SENDER, rows, link, since))
    conn.close()
    return since


def test_a_ledger_of_the_release_before_epochs_is_migrated_and_goes_on(open_store: Opener, store_path: Path) -> None:
    _v1_store(store_path, 2)
    rt = open_store()
    report = rt.hub.verify_sent("agent://a/alice")
    assert (report.ok, report.rows) == (True, 2), report  # version-1 nodes verify as before
    rt.hub.register_mailbox("agent://b/bob")
    rt.hub.bind("a", "alice").post("agent://b/bob", "after the migration")
    report = rt.hub.verify_sent("agent://a/alice")
    assert (report.ok, report.rows) == (True, 3), report  # a version-2 node goes on from them
    assert len(rt.hub.bind("a", "alice").sent().rows) == 3
    rt.stop()
    conn = apsw.Connection(str(store_path))
    conn.execute("UPDATE sent_index SET since_ms = since_ms + 1")
    conn.close()
    report = open_store().hub.verify_sent("agent://a/alice")
    # rows 1 and 2 carry no epoch (version 1): row 3 is the first that chains the real start
    assert (report.ok, report.first_bad) == (False, 3), report
    assert "sent_index.since_ms holds" in str(report.problem)


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
