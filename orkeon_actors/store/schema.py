"""The store's schema and its versioned migrations (``PRAGMA user_version``).

Version 1 is the contract of spec §11.1, table for table. Version 2 adds what the
durable hub needs on top (never dropping a contract column): message envelopes and a
FIFO sequence on ``mailboxes`` and ``outbox``, the durable mailbox registry, retained
last values, and indexes for the purge. Version 3 indexes ``pending_waits`` for the
lifecycle's lazy boot and wake at scale: a partial covering index of topic waits (the
distinct patterns at boot, the sleeping crews a publish matches, without reading the
other waits) and a covering index in the wait scheduler's ``(expires_at, wait_id)``
order (a window of expiries is a range scan, never a sort), which replaces version 1's
``expires_at`` index. Version 4 adds the topic cursors of sleeping
crews (``sleeping_cursors``, indexed by topic) and the events kept for them while they
sleep (``cursor_events``), see :mod:`orkeon_actors.store.cursor_events`. Version 5 adds
the outcomes of finished crews (``crew_outcomes``, see :mod:`orkeon_actors.store.outcomes`),
kept for their retention so a result survives a restart. Version 6 adds the mailbox
high-water marks of supervised crews (``mailbox_marks``, one row per crew and mailbox,
see :mod:`orkeon_actors.store.marks`), which replace their per-post
``processed_messages`` rows; rows written by earlier versions stay and still answer.
Version 7 adds the sender-owned sent history (``sent_index``, ``sent_heads``,
``sent_rows``, ``sent_nodes``, ``sent_intents``, ``sent_abandoned``, see
:mod:`orkeon_actors.store.sent_rows`). Version 10 adds ``agent_events``, the agents' recent
events for read-only views (:mod:`orkeon_actors.store.agent_events`). Version 8 keeps the number of crews with pending
waits (the crews asleep, ``count(DISTINCT crew_id)`` of ``pending_waits``) in
``store_counts``, maintained by triggers on ``pending_waits`` in the transaction of every
write (``INSERT``, ``INSERT OR REPLACE``, ``UPDATE``, ``DELETE``; not ``INSERT OR
IGNORE``, whose ignored row would still be counted), so a boot reads one row instead of
an index of every sleeping crew (the step counts them once). Version 9 makes a sleeping
crew smaller on disk and its sleep and wake touch fewer B-trees: ``mailbox_registry`` is a ``WITHOUT ROWID`` table (its
address key stored once, not in the table and again in an index), and the §11.1
indexes of ``pending_waits`` by topic, mailbox and correlation id leave out the waits
whose column is ``NULL`` (same names and columns; every lookup by one of them compares
it with a value, so the partial index answers it). Version 11 records every start of the
sent history's index (``sent_epochs``) and gives each ledger node the epoch it was written
in (``sent_nodes.epoch_ms``, chained into its link), so ``verify`` catches an edit of the
coverage start; nodes written before keep theirs (version 1, no epoch).

:func:`migrate` brings a file to :data:`SCHEMA_VERSION` in one transaction per step, so
a crash mid-migration leaves the previous version intact. A file whose version is newer
than this release knows, or that is not an orkeon store, raises ``StoreVersionError``
and is left untouched.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import attrs

from orkeon_actors.errors import StoreVersionError
from orkeon_actors.store import agent_events, sent_rows

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "CONTRACT_TABLES",
    "ASLEEP_COUNT_SQL",
    "Migration",
    "migrate",
    "stored_version",
]

APPLICATION_ID = 0x4F524B4E  # "ORKN" in PRAGMA application_id marks an orkeon store

CONTRACT_TABLES = frozenset({"crew_snapshots", "pending_waits", "mailboxes", "outbox", "processed_messages"})

_V1 = """
CREATE TABLE crew_snapshots (
    crew_id        TEXT PRIMARY KEY,
    snapshot       BLOB NOT NULL,
    mode           TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    snapshot_at    TEXT NOT NULL,
    state          TEXT NOT NULL
);
CREATE TABLE pending_waits (
    wait_id          TEXT PRIMARY KEY,
    crew_id          TEXT NOT NULL,
    kind             TEXT NOT NULL,
    topic            TEXT,
    target_crew_id   TEXT,
    target_mailbox   TEXT,
    correlation_id   TEXT,
    metadata_match   TEXT,
    started_at       TEXT NOT NULL,
    expires_at       TEXT,
    FOREIGN KEY (crew_id) REFERENCES crew_snapshots(crew_id) ON DELETE CASCADE
);
CREATE INDEX idx_pending_waits_topic_crew ON pending_waits(topic, target_crew_id);
CREATE INDEX idx_pending_waits_mailbox ON pending_waits(target_mailbox);
CREATE INDEX idx_pending_waits_correlation ON pending_waits(correlation_id);
CREATE INDEX idx_pending_waits_expires ON pending_waits(expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE mailboxes (
    mailbox_address TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    payload         BLOB NOT NULL,
    metadata        TEXT NOT NULL,
    received_at     TEXT NOT NULL,
    PRIMARY KEY (mailbox_address, message_id)
);
CREATE TABLE outbox (
    message_id     TEXT PRIMARY KEY,
    source_crew_id TEXT NOT NULL,
    target_mailbox TEXT,
    target_crew_id TEXT,
    topic          TEXT NOT NULL,
    payload        BLOB NOT NULL,
    metadata       TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    dispatched_at  TEXT,
    state          TEXT NOT NULL
);
CREATE INDEX idx_outbox_pending ON outbox(state, created_at) WHERE state = 'Pending';
CREATE TABLE processed_messages (
    message_id   TEXT NOT NULL,
    crew_id      TEXT NOT NULL,
    processed_at TEXT NOT NULL,
    PRIMARY KEY (message_id, crew_id)
);
"""

_V2 = """
ALTER TABLE mailboxes ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE mailboxes SET seq = rowid;
ALTER TABLE mailboxes ADD COLUMN topic TEXT NOT NULL DEFAULT '_system.post';
ALTER TABLE mailboxes ADD COLUMN source_crew_id TEXT NOT NULL DEFAULT '_system';
ALTER TABLE mailboxes ADD COLUMN source_agent_id TEXT;
ALTER TABLE mailboxes ADD COLUMN target_crew_id TEXT;
ALTER TABLE mailboxes ADD COLUMN correlation_id TEXT;
ALTER TABLE mailboxes ADD COLUMN published_at TEXT;
ALTER TABLE mailboxes ADD COLUMN schema_id TEXT NOT NULL DEFAULT '_none';
CREATE INDEX idx_mailboxes_fifo ON mailboxes(mailbox_address, seq);

ALTER TABLE outbox ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE outbox SET seq = rowid;
ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT 'publish';
UPDATE outbox SET kind = 'post' WHERE target_mailbox IS NOT NULL;
ALTER TABLE outbox ADD COLUMN source_agent_id TEXT;
ALTER TABLE outbox ADD COLUMN correlation_id TEXT;
ALTER TABLE outbox ADD COLUMN schema_id TEXT NOT NULL DEFAULT '_none';
ALTER TABLE outbox ADD COLUMN last_value_key TEXT;
ALTER TABLE outbox ADD COLUMN error TEXT;
CREATE INDEX idx_outbox_purge ON outbox(state, dispatched_at);

CREATE TABLE mailbox_registry (
    address       TEXT PRIMARY KEY,
    registered_at TEXT NOT NULL
);
INSERT OR IGNORE INTO mailbox_registry(address, registered_at)
    SELECT mailbox_address, min(received_at) FROM mailboxes GROUP BY mailbox_address;

CREATE TABLE last_values (
    scope           TEXT NOT NULL,
    key             TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    topic           TEXT NOT NULL,
    source_crew_id  TEXT NOT NULL,
    source_agent_id TEXT,
    target_crew_id  TEXT,
    target_mailbox  TEXT,
    correlation_id  TEXT,
    published_at    TEXT NOT NULL,
    metadata        TEXT NOT NULL,
    payload         BLOB NOT NULL,
    schema_id       TEXT NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE INDEX idx_crew_snapshots_state ON crew_snapshots(state, snapshot_at);
CREATE INDEX idx_pending_waits_crew ON pending_waits(crew_id);
CREATE INDEX idx_processed_messages_crew ON processed_messages(crew_id, processed_at);
"""

_V3 = """
CREATE INDEX idx_pending_waits_on_topic
    ON pending_waits(topic, target_crew_id, crew_id, metadata_match) WHERE kind = 'OnTopic';
CREATE INDEX idx_pending_waits_expiry_order
    ON pending_waits(expires_at, wait_id, crew_id) WHERE expires_at IS NOT NULL;
DROP INDEX idx_pending_waits_expires;
"""


_V4 = """
CREATE TABLE sleeping_cursors (
    crew_id        TEXT NOT NULL,
    cursor_key     TEXT NOT NULL,
    topic          TEXT NOT NULL,
    metadata_match TEXT NOT NULL,
    missed         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (crew_id, cursor_key),
    FOREIGN KEY (crew_id) REFERENCES crew_snapshots(crew_id) ON DELETE CASCADE
);
CREATE INDEX idx_sleeping_cursors_topic ON sleeping_cursors(topic);
CREATE TABLE cursor_events (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    crew_id         TEXT NOT NULL,
    cursor_key      TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    topic           TEXT NOT NULL,
    source_crew_id  TEXT NOT NULL,
    source_agent_id TEXT,
    target_crew_id  TEXT,
    target_mailbox  TEXT,
    correlation_id  TEXT,
    published_at    TEXT NOT NULL,
    metadata        TEXT NOT NULL,
    payload         BLOB NOT NULL,
    schema_id       TEXT NOT NULL,
    FOREIGN KEY (crew_id) REFERENCES crew_snapshots(crew_id) ON DELETE CASCADE
);
CREATE INDEX idx_cursor_events_cursor ON cursor_events(crew_id, cursor_key, seq);
"""

_V5 = """
CREATE TABLE crew_outcomes (
    crew_id        TEXT PRIMARY KEY,
    status         TEXT NOT NULL CHECK (status IN ('Completed', 'Failed')),
    result         TEXT,
    failure        TEXT,
    final_snapshot TEXT,
    finished_at    TEXT NOT NULL
);
CREATE INDEX idx_crew_outcomes_finished ON crew_outcomes(status, finished_at);
"""

_V6 = """
CREATE TABLE mailbox_marks (
    crew_id         TEXT NOT NULL,
    mailbox_address TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    message_id      TEXT NOT NULL,
    processed_at    TEXT NOT NULL,
    PRIMARY KEY (crew_id, mailbox_address)
) WITHOUT ROWID;
"""

_V8 = """
CREATE TABLE store_counts (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO store_counts (name, value) SELECT 'asleep_crews', count(DISTINCT crew_id) FROM pending_waits;
-- BEFORE: the crew's rows are looked at before an INSERT OR REPLACE removes the one it replaces
-- (a replaced row of the same crew leaves the count as it is; its delete fires no trigger).
CREATE TRIGGER pending_waits_first_of_crew BEFORE INSERT ON pending_waits
WHEN NOT EXISTS (SELECT 1 FROM pending_waits WHERE crew_id = NEW.crew_id)
BEGIN
    UPDATE store_counts SET value = value + 1 WHERE name = 'asleep_crews';
END;
-- An INSERT OR REPLACE that takes a wait id from another crew removes that crew's row
-- without a delete trigger: its crew leaves the count when that row was its last.
CREATE TRIGGER pending_waits_taken_from_crew BEFORE INSERT ON pending_waits
WHEN EXISTS (SELECT 1 FROM pending_waits WHERE wait_id = NEW.wait_id AND crew_id IS NOT NEW.crew_id)
    AND NOT EXISTS (SELECT 1 FROM pending_waits WHERE wait_id != NEW.wait_id
                    AND crew_id = (SELECT crew_id FROM pending_waits WHERE wait_id = NEW.wait_id))
BEGIN
    UPDATE store_counts SET value = value - 1 WHERE name = 'asleep_crews';
END;
CREATE TRIGGER pending_waits_last_of_crew AFTER DELETE ON pending_waits
WHEN NOT EXISTS (SELECT 1 FROM pending_waits WHERE crew_id = OLD.crew_id)
BEGIN
    UPDATE store_counts SET value = value - 1 WHERE name = 'asleep_crews';
END;
CREATE TRIGGER pending_waits_crew_gained BEFORE UPDATE OF crew_id ON pending_waits
WHEN NEW.crew_id IS NOT OLD.crew_id AND NOT EXISTS (SELECT 1 FROM pending_waits WHERE crew_id = NEW.crew_id)
BEGIN
    UPDATE store_counts SET value = value + 1 WHERE name = 'asleep_crews';
END;
CREATE TRIGGER pending_waits_crew_left AFTER UPDATE OF crew_id ON pending_waits
WHEN NEW.crew_id IS NOT OLD.crew_id AND NOT EXISTS (SELECT 1 FROM pending_waits WHERE crew_id = OLD.crew_id)
BEGIN
    UPDATE store_counts SET value = value - 1 WHERE name = 'asleep_crews';
END;
"""

_V9 = """
CREATE TABLE mailbox_registry_v9 (
    address       TEXT PRIMARY KEY,
    registered_at TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO mailbox_registry_v9 (address, registered_at) SELECT address, registered_at FROM mailbox_registry;
DROP TABLE mailbox_registry;
ALTER TABLE mailbox_registry_v9 RENAME TO mailbox_registry;
DROP INDEX idx_pending_waits_topic_crew;
CREATE INDEX idx_pending_waits_topic_crew ON pending_waits(topic, target_crew_id) WHERE topic IS NOT NULL;
DROP INDEX idx_pending_waits_mailbox;
CREATE INDEX idx_pending_waits_mailbox ON pending_waits(target_mailbox) WHERE target_mailbox IS NOT NULL;
DROP INDEX idx_pending_waits_correlation;
CREATE INDEX idx_pending_waits_correlation ON pending_waits(correlation_id) WHERE correlation_id IS NOT NULL;
"""

ASLEEP_COUNT_SQL = "SELECT value FROM store_counts WHERE name = 'asleep_crews'"
"""The crews with pending waits (version 8 on): one row, whatever the number of crews."""


@attrs.frozen
class Migration:
    """One step: brings a store from ``version - 1`` to ``version``."""

    version: int
    description: str
    apply: Callable[[apsw.Connection], None]


def _script(sql: str) -> Callable[[apsw.Connection], None]:
    def apply(conn: apsw.Connection) -> None:
        conn.execute(sql)

    return apply


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "spec §11.1 contract tables", _script(_V1)),
    Migration(2, "envelopes, FIFO sequence, mailbox registry, last values, purge indexes", _script(_V2)),
    Migration(3, "wait indexes for a million sleeping crews: topic waits, expiry order", _script(_V3)),
    Migration(4, "sleeping crews' topic cursors and the events kept for them", _script(_V4)),
    Migration(5, "outcomes of finished crews, kept for their retention", _script(_V5)),
    Migration(6, "mailbox high-water marks of supervised crews instead of a row per post", _script(_V6)),
    Migration(7, "sender-owned sent history: heads, rows, ledger nodes, intents", _script(sent_rows.SCHEMA)),
    Migration(8, "the number of crews with pending waits, kept by triggers (a boot reads one row)", _script(_V8)),
    Migration(9, "smaller sleeping crews: mailbox registry without rowid, wait indexes without NULLs", _script(_V9)),
    Migration(10, "the agents' recent events, for read-only views", _script(agent_events.SCHEMA)),
    Migration(11, "the sent history's index epochs, chained into its ledger nodes", _script(sent_rows.EPOCHS_SCHEMA)),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def _user_tables(conn: apsw.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    return {str(row[0]) for row in rows}


def _scalar(conn: apsw.Connection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row is not None else 0


def stored_version(conn: apsw.Connection, path: str) -> int:
    """The file's schema version; a pre-versioning file holding exactly the contract
    tables counts as version 1. Raises ``StoreVersionError`` for a foreign file. Only
    reads (:mod:`orkeon_actors.store.identity` runs it on a read-only connection)."""
    application_id = _scalar(conn, "PRAGMA application_id")
    if application_id not in (0, APPLICATION_ID):
        raise StoreVersionError(
            f"{path} belongs to another application (application_id {application_id:#x}); "
            "give the runtime its own store file",
            path=path,
        )
    version = _scalar(conn, "PRAGMA user_version")
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"{path} has store schema version {version}, but this orkeon_actors only knows versions up to "
            f"{SCHEMA_VERSION}: it was written by a newer release. Upgrade orkeon_actors "
            "(pip install -U orkeon-actors) to open it; the file was left untouched.",
            path=path,
            found=version,
            known=SCHEMA_VERSION,
        )
    if version > 0 and application_id != APPLICATION_ID and not CONTRACT_TABLES <= _user_tables(conn):
        raise StoreVersionError(
            f"{path} is not an orkeon store (user_version {version}, no orkeon application_id and not the "
            "spec §11.1 tables); give the runtime its own store file",
            path=path,
            found=version,
            known=SCHEMA_VERSION,
        )
    if version == 0:
        tables = _user_tables(conn)
        if tables and CONTRACT_TABLES <= tables and application_id in (0, APPLICATION_ID):
            return 1
        if tables:
            raise StoreVersionError(
                f"{path} is not an orkeon store (it has tables {sorted(tables)} and no orkeon schema version); "
                "give the runtime its own store file",
                path=path,
                found=0,
                known=SCHEMA_VERSION,
            )
    return version


def migrate(conn: apsw.Connection, path: str) -> tuple[int, int]:
    """Bring the store behind ``conn`` to :data:`SCHEMA_VERSION`. Returns ``(from, to)``.

    Each step runs in its own ``BEGIN IMMEDIATE`` transaction together with the
    ``user_version`` bump, so it either applies whole or not at all.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        start = stored_version(conn, path)
    finally:
        conn.execute("COMMIT")
    version = start
    for step in MIGRATIONS:
        if step.version <= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            step.apply(conn)
            conn.execute(f"PRAGMA user_version = {step.version}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        version = step.version
    return start, version
