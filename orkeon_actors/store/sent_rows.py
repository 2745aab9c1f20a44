"""The sent history's tables and statements (sender-owned history requirements,
MESSAGE-R01..R08), on the writer's or a reader's connection; nothing here commits.

* ``sent_index`` (one row): present while the store keeps the index, with the unix ms
  it started at. Without it the coverage is ``unavailable``.
* ``sent_epochs`` (schema version 11): every start of the index (and when it stopped),
  which the ledger's nodes chain (their ``epoch_ms``), so that ``verify`` catches an
  edit of ``sent_index.since_ms`` (:class:`~orkeon_actors.history.ledger.Epochs`).
* ``sent_heads``: one constant-size head per sender (count, tip link, first send): the
  local trust root (MESSAGE-A03), replaced in the transaction of each completed send.
* ``sent_rows``: the canonical record bytes of each completed send, by ``(sender,
  seq)``; the scoped idempotency key is unique per ``(sender, recipient, key)``.
* ``sent_nodes``: the immutable ledger node of each row (its hash and link).
* ``sent_intents``: sends reserved and not completed, with their original bytes.
* ``sent_abandoned``: intents that can never complete (a reply whose requester died
  with the process), kept for audit, never counted as rows.

Each completed send does constant history-dependent work (read the head, insert one
row and one node, replace the head: R08); reads and verification are linear in the
sender's own rows and never touch a mailbox. ``--to`` filters the sender's rows as it
reads them (no recipient index: one B-tree less to write per send, and a read stays
bounded by the sender's own history).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Sequence
from typing import Final

import apsw
import attrs

from orkeon_actors.errors import StoreCorruptError
from orkeon_actors.history import ledger
from orkeon_actors.history.endpoint import Endpoint
from orkeon_actors.history.ledger import LedgerColumnError, LedgerHead, LedgerNode, LedgerUnreadableError
from orkeon_actors.history.records import SendKind, SentIntent, SentRecord
from orkeon_actors.history.view import Coverage, CoverageState
from orkeon_actors.store import faults
from orkeon_actors.wire.sent_history import (
    SentRecordError,
    intent_bytes,
    intent_from_bytes,
    record_bytes,
    record_content_digest,
    record_from_bytes,
    record_of,
)

__all__ = [
    "SCHEMA",
    "LedgerEntry",
    "LedgerTables",
    "append_batch",
    "complete",
    "coverage",
    "drop_index",
    "ensure_index",
    "EPOCHS_SCHEMA",
    "index_epoch",
    "find_key",
    "find_reply",
    "column_disagreement",
    "has_tables",
    "pending_intents",
    "read_rows",
    "reserve",
]

SCHEMA: Final = """
CREATE TABLE sent_index (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    since_ms INTEGER NOT NULL
);
CREATE TABLE sent_heads (
    sender   TEXT PRIMARY KEY,
    count    INTEGER NOT NULL,
    tip      BLOB NOT NULL,
    since_ms INTEGER NOT NULL,
    version  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE sent_rows (
    sender          TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    message_id      TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    sent_ms         INTEGER NOT NULL,
    idempotency_key TEXT,
    content         BLOB NOT NULL,
    record          BLOB NOT NULL,
    PRIMARY KEY (sender, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX idx_sent_rows_key ON sent_rows(sender, recipient, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE sent_nodes (
    sender   TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    row_hash BLOB NOT NULL,
    link     BLOB NOT NULL,
    version  INTEGER NOT NULL,
    PRIMARY KEY (sender, seq)
) WITHOUT ROWID;
CREATE TABLE sent_intents (
    message_id      TEXT PRIMARY KEY,
    sender          TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    idempotency_key TEXT,
    content         BLOB NOT NULL,
    intent          BLOB NOT NULL,
    created_ms      INTEGER NOT NULL
);
CREATE INDEX idx_sent_intents_sender ON sent_intents(sender);
CREATE UNIQUE INDEX idx_sent_intents_key ON sent_intents(sender, recipient, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE sent_abandoned (
    message_id   TEXT PRIMARY KEY,
    sender       TEXT NOT NULL,
    intent       BLOB NOT NULL,
    abandoned_ms INTEGER NOT NULL,
    reason       TEXT NOT NULL
);
"""

EPOCHS_SCHEMA: Final = """
CREATE TABLE sent_epochs (
    since_ms   INTEGER PRIMARY KEY,
    stopped_ms INTEGER
);
INSERT INTO sent_epochs (since_ms) SELECT since_ms FROM sent_index;
ALTER TABLE sent_nodes ADD COLUMN epoch_ms INTEGER;
"""
"""Schema version 11: the index's epochs, and each node's (``NULL`` for a version-1
node); a running index becomes the open epoch."""

_TABLES: Final = ("sent_index", "sent_heads", "sent_rows", "sent_nodes", "sent_intents")


def has_tables(conn: apsw.Connection) -> bool:
    """Whether the store has the history's tables (an older store may not)."""
    marks = ", ".join("?" * len(_TABLES))
    row = conn.execute(
        f"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ({marks})", _TABLES
    ).fetchone()
    return row is not None and int(row[0]) == len(_TABLES)


def ensure_index(conn: apsw.Connection, now_ms: int) -> int:
    """Start the index (now) unless it runs, recording the new epoch; returns its start."""
    row = conn.execute("SELECT since_ms FROM sent_index WHERE id = 1").fetchone()
    if row is not None:
        return int(row[0])
    last = conn.execute("SELECT max(since_ms) FROM sent_epochs").fetchone()
    since = max(now_ms, int(last[0]) + 1) if last is not None and last[0] is not None else now_ms
    conn.execute("INSERT INTO sent_index (id, since_ms) VALUES (1, ?)", (since,))
    conn.execute("INSERT INTO sent_epochs (since_ms) VALUES (?)", (since,))
    return since


def drop_index(conn: apsw.Connection, now_ms: int) -> None:
    """The store runs without the index from now on: every coverage is ``unavailable``
    until it is started again (and then only complete from that new start)."""
    conn.execute("DELETE FROM sent_index")
    conn.execute("UPDATE sent_epochs SET stopped_ms = ? WHERE stopped_ms IS NULL", (now_ms,))


def index_epoch(conn: apsw.Connection) -> int:
    """The start of the running index, which a node written now chains (``0``: off)."""
    return _index_since(conn) or 0


def _index_since(conn: apsw.Connection) -> int | None:
    row = conn.execute("SELECT since_ms FROM sent_index WHERE id = 1").fetchone()
    return None if row is None else int(row[0])


# -- the ledger's storage ------------------------------------------------------------------

_COLUMNS: Final = "message_id, recipient, sent_ms, idempotency_key, content"
"""The columns of ``sent_rows`` that queries filter (``recipient``: ``--to``,
``sent_ms``: ``--since``), dedupe on (``idempotency_key``, ``content``, ``message_id``)
or show: each is a copy of the hashed record, checked against it."""


def column_disagreement(record: SentRecord, columns: tuple[object, ...], *, with_content: bool) -> str | None:
    """What the row's ``_COLUMNS`` (in that order) say that its hashed ``record`` does
    not, or ``None``. An unkeyed row's ``content`` is never compared against (no key
    looks it up): it may be empty. ``with_content=False`` skips the digest (a read)."""
    message_id, recipient, sent_ms, key, content = columns
    expected: tuple[tuple[str, object, object], ...] = (
        ("message_id", message_id, record.message_id),
        ("recipient", recipient, record.to.key),
        ("sent_ms", sent_ms, record.sent_at_ms),
        ("idempotency_key", key, record.idempotency_key),
    )
    for name, column, hashed in expected:
        if column != hashed:
            return (
                f"its {name} column holds {column!r} but the hashed record says {hashed!r} "
                "(the column was edited behind the ledger)"
            )
    if with_content and not (record.idempotency_key is None and content == b""):
        digest = record_content_digest(record)
        if content != digest:
            return (
                "its content column is not the digest of the hashed record's content "
                "(the column was edited behind the ledger)"
            )
    return None


class LedgerTables:
    """The :class:`~orkeon_actors.history.ledger.LedgerSource` of one connection. A row
    that does not decode as a record of this release's version, or that names another
    sender or message, is *unreadable*: the ledger stops there."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    @functools.cached_property
    def _epochs_kept(self) -> bool:
        """Whether the store records epochs (schema version 11 on; a read-only view may
        read an older store, whose nodes are all of version 1)."""
        found = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sent_epochs'")
        return found.fetchone() is not None

    def head(self, sender: str) -> LedgerHead | None:
        row = self.conn.execute(
            "SELECT count, tip, since_ms, version FROM sent_heads WHERE sender = ?", (sender,)
        ).fetchone()
        if row is None:
            return None
        count, tip, since_ms, version = row
        if not isinstance(count, int) or not isinstance(tip, bytes) or len(tip) != 32 or not isinstance(since_ms, int):
            raise LedgerUnreadableError(f"the head of {sender} holds malformed columns")
        return LedgerHead(sender, count, tip, since_ms, int(version))

    def node(self, sender: str, seq: int) -> LedgerNode | None:
        epoch_column = "epoch_ms" if self._epochs_kept else "NULL"
        row = self.conn.execute(
            f"SELECT row_hash, link, version, {epoch_column} FROM sent_nodes WHERE sender = ? AND seq = ?",
            (sender, seq),
        ).fetchone()
        if row is None:
            return None
        row_hash, link, version, epoch = row
        if (
            not isinstance(row_hash, bytes)
            or not isinstance(link, bytes)
            or len(link) != 32
            or not (epoch is None or isinstance(epoch, int))
        ):
            raise LedgerUnreadableError(f"node {seq} holds malformed columns")
        return LedgerNode(seq, row_hash, link, int(version), epoch)

    def epochs(self) -> tuple[int, ...]:
        if not self._epochs_kept:
            start = self.index_start()
            return () if start is None else (start,)
        return tuple(int(row[0]) for row in self.conn.execute("SELECT since_ms FROM sent_epochs ORDER BY since_ms"))

    def index_start(self) -> int | None:
        return _index_since(self.conn)

    def index_open(self) -> int | None:
        if not self._epochs_kept:
            return self.index_start()
        row = self.conn.execute(
            "SELECT since_ms FROM sent_epochs WHERE stopped_ms IS NULL ORDER BY since_ms DESC LIMIT 1"
        ).fetchone()
        last = self.conn.execute("SELECT max(since_ms) FROM sent_epochs").fetchone()
        if row is None or last is None or row[0] != last[0]:
            return None  # the last epoch stopped: nothing runs
        return int(row[0])

    def row(self, sender: str, seq: int) -> bytes | None:
        found = self.conn.execute(
            "SELECT record, message_id FROM sent_rows WHERE sender = ? AND seq = ?", (sender, seq)
        ).fetchone()
        if found is None:
            return None
        raw, message_id = found
        if not isinstance(raw, bytes):
            raise LedgerUnreadableError(f"row {seq} is not a byte string")
        try:
            record = record_from_bytes(raw)
        except SentRecordError as exc:
            raise LedgerUnreadableError(f"row {seq}: {exc}") from exc
        if record.sender.id != sender or record.message_id != message_id:
            raise LedgerUnreadableError(f"row {seq} names sender {record.sender.id} and message {record.message_id}")
        return raw

    def columns(self, sender: str, seq: int) -> None:
        """Every column a query filters, shows or dedupes on agrees with the row's
        hashed record (:func:`column_disagreement`, the content digest included)."""
        found = self.conn.execute(
            f"SELECT record, {_COLUMNS} FROM sent_rows WHERE sender = ? AND seq = ?", (sender, seq)
        ).fetchone()
        assert found is not None  # row() found it in this same snapshot
        raw, *columns = found
        disagreement = column_disagreement(record_from_bytes(bytes(raw)), tuple(columns), with_content=True)
        if disagreement is not None:
            raise LedgerColumnError(f"row {seq}: {disagreement}")

    def max_seq(self, sender: str) -> int:
        row = self.conn.execute(
            "SELECT max(coalesce((SELECT max(seq) FROM sent_rows WHERE sender = ?1), 0),"
            " coalesce((SELECT max(seq) FROM sent_nodes WHERE sender = ?1), 0))",
            (sender,),
        ).fetchone()
        return int(row[0]) if row is not None else 0


# -- writing (the writer's connection, inside its transaction) -----------------------------

_INSERT_ROW: Final = (
    "INSERT INTO sent_rows (sender, seq, message_id, recipient, sent_ms, idempotency_key, content, record)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_NODE: Final = (
    "INSERT INTO sent_nodes (sender, seq, row_hash, link, version, epoch_ms) VALUES (?, ?, ?, ?, ?, ?)"
)
_UPSERT_HEAD: Final = (
    "INSERT INTO sent_heads (sender, count, tip, since_ms, version) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (sender) DO UPDATE SET count = excluded.count, tip = excluded.tip, version = excluded.version"
)


@attrs.frozen
class LedgerEntry:
    """One completed send, its record bytes and their SHA-256 prepared off the writer:
    what :func:`append_batch` chains onto its sender's ledger at ``linked_ms``."""

    intent: SentIntent
    content: bytes
    raw: bytes
    row_hash: bytes
    sent_ms: int
    linked_ms: int

    @classmethod
    def of(cls, intent: SentIntent, content: bytes, linked_ms: int) -> LedgerEntry:
        """The entry of ``intent`` completed now: its record's canonical bytes and hash."""
        record = record_of(intent)
        raw = record_bytes(record)
        return cls(intent, content, raw, hashlib.sha256(raw).digest(), record.sent_at_ms, linked_ms)


def append_batch(conn: apsw.Connection, entries: Sequence[LedgerEntry], epoch: int | None = None) -> None:
    """Record many completed sends: each sender's head read once, its entries chained in
    the order given, then the rows, nodes and heads written with one prepared statement
    each (constant history-dependent work per send, R08). The crash points
    ``send.row_written``, ``send.node_written`` and ``send.head_replaced`` are reached
    once per entry, in that order, for the whole batch. ``epoch``: the start of the
    running index, which the nodes chain (read from the store when not given).

    Raises ``StoreCorruptError`` naming the sender and the command that inspects it when
    a head is damaged or of another version: nothing of the batch is then written by
    the caller's transaction, which the writer rolls back and retries item by item."""
    tables = LedgerTables(conn)
    if epoch is None:
        epoch = index_epoch(conn)
    heads: dict[str, LedgerHead | None] = {}
    rows, nodes = [], []
    for entry in entries:
        intent = entry.intent
        sender = intent.sender.id
        if sender not in heads:
            try:
                heads[sender] = tables.head(sender)
            except LedgerUnreadableError as exc:
                raise StoreCorruptError(
                    f"the sent-history head of {intent.sender.address} is damaged ({exc}); nothing was sent. "
                    f"Inspect it with: orkeon message verify {intent.sender.address} --store PATH"
                ) from exc
        try:
            head, node = ledger.append_hash(heads[sender], sender, entry.row_hash, entry.linked_ms, epoch)
        except ValueError as exc:  # a head of another version
            raise StoreCorruptError(f"{exc}; nothing was sent") from exc
        heads[sender] = head
        rows.append(
            (
                sender,
                node.seq,
                intent.message_id,
                intent.to.key,
                entry.sent_ms,
                intent.idempotency_key,
                entry.content,
                entry.raw,
            )
        )
        nodes.append((sender, node.seq, node.row_hash, node.link, node.version, node.epoch))
    conn.executemany(_INSERT_ROW, rows)
    for _ in entries:
        faults.hit("send.row_written")
    conn.executemany(_INSERT_NODE, nodes)
    for _ in entries:
        faults.hit("send.node_written")
    conn.executemany(
        _UPSERT_HEAD, [(s, h.count, h.tip, h.since_ms, h.version) for s, h in heads.items() if h is not None]
    )
    for _ in entries:
        faults.hit("send.head_replaced")


def find_key(
    conn: apsw.Connection, sender: Endpoint, to: Endpoint, key: str
) -> tuple[str, bytes, SentRecord | SentIntent] | None:
    """What already holds ``(sender, to, key)``: ``(message id, content digest, the
    completed record or the pending intent)``, or ``None``."""
    found = conn.execute(
        "SELECT message_id, content, record FROM sent_rows WHERE sender = ? AND recipient = ? AND idempotency_key = ?",
        (sender.id, to.key, key),
    ).fetchone()
    if found is not None:
        return str(found[0]), bytes(found[1]), record_from_bytes(bytes(found[2]))
    pending = conn.execute(
        "SELECT message_id, content, intent FROM sent_intents"
        " WHERE sender = ? AND recipient = ? AND idempotency_key = ?",
        (sender.id, to.key, key),
    ).fetchone()
    if pending is not None:
        return str(pending[0]), bytes(pending[1]), intent_from_bytes(bytes(pending[2]))
    return None


def find_reply(
    conn: apsw.Connection, sender: str, key: str, correlation_id: str
) -> tuple[bytes, SentRecord | SentIntent] | None:
    """``sender``'s reply under ``key`` to the request ``correlation_id``, completed or
    pending: ``(content digest, record or intent)``, or ``None``. A key is scoped by its
    recipient, so the sender's rows with that key are few; each is decoded."""
    for content, raw in conn.execute(
        "SELECT content, record FROM sent_rows WHERE sender = ? AND idempotency_key = ?", (sender, key)
    ):
        record = record_from_bytes(bytes(raw))
        if record.kind is SendKind.REPLY and record.correlation_id == correlation_id:
            return bytes(content), record
    for content, raw in conn.execute(
        "SELECT content, intent FROM sent_intents WHERE sender = ? AND idempotency_key = ?", (sender, key)
    ):
        intent = intent_from_bytes(bytes(raw))
        if intent.kind is SendKind.REPLY and str(intent.message.correlation_id) == correlation_id:
            return bytes(content), intent
    return None


def reserve(conn: apsw.Connection, intent: SentIntent, content: bytes) -> None:
    """Write the durable intent of a send (its original bytes)."""
    conn.execute(
        "INSERT INTO sent_intents (message_id, sender, recipient, idempotency_key, content, intent, created_ms)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            intent.message_id,
            intent.sender.id,
            intent.to.key,
            intent.idempotency_key,
            content,
            intent_bytes(intent),
            intent.created_ms,
        ),
    )


def complete(conn: apsw.Connection, record: SentRecord, content: bytes, now_ms: int) -> int:
    """Record a completed send: read the head, insert the row and its node, replace the
    head, drop the intent if one was reserved (constant work). Returns the row's seq.
    The recipient copy must already exist (in this transaction or before)."""
    sender = record.sender.id
    tables = LedgerTables(conn)
    raw = record_bytes(record)
    head, node = ledger.append(tables.head(sender), sender, raw, now_ms, index_epoch(conn))
    conn.execute(
        _INSERT_ROW,
        (sender, node.seq, record.message_id, record.to.key, record.sent_at_ms, record.idempotency_key, content, raw),
    )
    faults.hit("send.row_written")
    conn.execute(
        _INSERT_NODE,
        (sender, node.seq, node.row_hash, node.link, node.version, node.epoch),
    )
    faults.hit("send.node_written")
    conn.execute(
        _UPSERT_HEAD,
        (sender, head.count, head.tip, head.since_ms, head.version),
    )
    faults.hit("send.head_replaced")
    conn.execute("DELETE FROM sent_intents WHERE message_id = ?", (record.message_id,))
    faults.hit("send.intent_cleaned")
    return node.seq


def abandon(conn: apsw.Connection, intent: SentIntent, raw: bytes, now_ms: int, reason: str) -> None:
    """Move an intent that can never complete to ``sent_abandoned``."""
    conn.execute(
        "INSERT OR REPLACE INTO sent_abandoned (message_id, sender, intent, abandoned_ms, reason)"
        " VALUES (?, ?, ?, ?, ?)",
        (intent.message_id, intent.sender.id, raw, now_ms, reason),
    )
    conn.execute("DELETE FROM sent_intents WHERE message_id = ?", (intent.message_id,))


def is_completed(conn: apsw.Connection, sender: str, message_id: str) -> bool:
    """Whether ``message_id`` is already a completed row of ``sender`` (an intent for it is
    cleanup state). Uses the recipient index only through the sender's rows."""
    return (
        conn.execute(
            "SELECT 1 FROM sent_rows WHERE sender = ? AND message_id = ? LIMIT 1", (sender, message_id)
        ).fetchone()
        is not None
    )


# -- reading ---------------------------------------------------------------------------------


def pending_intents(conn: apsw.Connection, sender: str | None = None) -> Iterator[tuple[str, bytes]]:
    """``(message id, intent bytes)`` of every pending intent (of ``sender``), oldest first."""
    if sender is None:
        rows = conn.execute("SELECT message_id, intent FROM sent_intents ORDER BY created_ms, message_id")
    else:
        rows = conn.execute(
            "SELECT message_id, intent FROM sent_intents WHERE sender = ? ORDER BY created_ms, message_id", (sender,)
        )
    for message_id, raw in rows:
        yield str(message_id), bytes(raw)


def coverage(conn: apsw.Connection, sender: str) -> Coverage:
    """The coverage of ``sender``'s history, from the index marker and its pending
    intents (an intent already completed is cleanup state, not pending). Its boundary is
    exclusive, as ``--since`` is: the millisecond before the index (re)started, so that
    every send stamped since then, the very first included, lies strictly after it."""
    if not has_tables(conn):
        return Coverage(CoverageState.UNAVAILABLE, None)
    since_index = _index_since(conn)
    if since_index is None:
        return Coverage(CoverageState.UNAVAILABLE, None)
    pending = sum(1 for message_id, _ in pending_intents(conn, sender) if not is_completed(conn, sender, message_id))
    return Coverage(CoverageState.PARTIAL if pending else CoverageState.COMPLETE, since_index - 1, pending)


def read_rows(
    conn: apsw.Connection,
    sender: str,
    to: Endpoint | None = None,
    since_ms: int | None = None,
    after_seq: int | None = None,
) -> list[tuple[int, SentRecord]]:
    """``(seq, record)`` of ``sender``'s completed rows in ledger order, oldest first
    (to one recipient; sent strictly after ``since_ms``; past the ledger position
    ``after_seq``). Raises ``StoreCorruptError`` naming the first row this release cannot
    read or whose columns disagree with its hashed record (never skipped: a gap would
    pass for completeness)."""
    sql = f"SELECT seq, record, {_COLUMNS} FROM sent_rows WHERE sender = ?"
    params: list[object] = [sender]
    if after_seq is not None:
        sql += " AND seq > ?"
        params.append(after_seq)
    if to is not None:
        sql += " AND recipient = ?"
        params.append(to.key)
    if since_ms is not None:
        sql += " AND sent_ms > ?"
        params.append(since_ms)
    sql += " ORDER BY seq"
    rows = []
    for seq, raw, *columns in conn.execute(sql, params):
        try:
            record = record_from_bytes(bytes(raw))
        except SentRecordError as exc:
            raise _damaged(sender, seq, str(exc)) from exc
        disagreement = column_disagreement(record, tuple(columns), with_content=False)
        if disagreement is not None or record.sender.id != sender:
            raise _damaged(sender, seq, disagreement or f"it names sender {record.sender.id}")
        rows.append((int(seq), record))
    return rows


def _damaged(sender: str, seq: int, what: str) -> StoreCorruptError:
    return StoreCorruptError(
        f"sent row {seq} of {sender} is damaged: {what}. Nothing is listed rather than a history with a hole; "
        f"find every damaged position with: orkeon message verify --id {sender} --store PATH"
    )
