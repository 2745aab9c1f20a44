"""``SqliteCrewStateStore``: crew snapshots and their ``pending_waits`` rows, on the
durable hub's writer (spec §7.2, §11.1): the SQLite adapter of the lifecycle's
:class:`~orkeon_actors.lifecycle.ports.DurableCrewStateStore` port.

A save is **one transaction**: the ``crew_snapshots`` row (state ``Asleep``), the
replacement of the crew's ``pending_waits`` rows by the snapshot's waits, and the
``processed_messages`` rows of the triggers the crew handled since it last woke (§11.2),
and the *acknowledgement* of the mailbox messages it consumed since its previous
snapshot: their ``mailboxes`` rows are deleted and the crew's high-water mark of each
mailbox moved to the last of them in the same transaction (one row per crew and
mailbox, :mod:`orkeon_actors.store.marks`: mailbox delivery is FIFO, so order implies
processing and a crew handling a million posts keeps as few rows as it has mailboxes);
with them the index of the crew's topic cursors
(``sleeping_cursors``: events for them are kept while it sleeps) and the deletion of the
kept events it was handed at its last wake (:mod:`orkeon_actors.store.cursor_events`).
Either all of it is written or none: a failed save
leaves the previous snapshot, index and kept messages intact (the supervisor then keeps
the crew active), and a crash before the commit restores the previous snapshot with
those messages delivered again, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import apsw
from loguru import logger

from orkeon_actors.crew.handover import snapshot_cursors
from orkeon_actors.crew.snapshot import CrewSnapshot, from_json, to_json
from orkeon_actors.crew.state import OnMailbox, OnReply, OnTopic, PendingWait
from orkeon_actors.lifecycle.ports import StoredState
from orkeon_actors.model.ids import CrewId
from orkeon_actors.store import cursor_events, faults, mailboxes, marks
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.durable_hub import SqliteEventHub
from orkeon_actors.store.records import CrewState, PendingWaitKind, PendingWaitRecord, to_row
from orkeon_actors.store.unit_of_work import PUT_WAIT, UPSERT_SNAPSHOT, delete_crew
from orkeon_actors.store.write_queue import crew_key
from orkeon_actors.store.writer import WriteGroup

__all__ = ["SqliteCrewStateStore", "wait_record"]

_MARK_ACTIVE = (
    "UPDATE crew_snapshots SET state = 'Active', snapshot_at = ? WHERE crew_id = ? AND state IN ('Asleep', 'Active')"
)
"""A woken crew's row (never a failed one's: its audit row stays as it is)."""
_PROCESSED = "INSERT OR IGNORE INTO processed_messages (message_id, crew_id, processed_at) VALUES (?, ?, ?)"


def wait_record(crew_id: CrewId, wait: PendingWait) -> PendingWaitRecord:
    """The ``pending_waits`` row of one of the crew's waits."""
    kind = wait.kind
    if isinstance(kind, OnTopic):
        return PendingWaitRecord(
            wait.wait_id,
            crew_id,
            PendingWaitKind.ON_TOPIC,
            wait.started_at,
            wait.expires_at,
            topic=kind.topic,
            target_crew_id=kind.target_crew_scope,
            metadata_match=kind.metadata_match,
        )
    if isinstance(kind, OnMailbox):
        return PendingWaitRecord(
            wait.wait_id,
            crew_id,
            PendingWaitKind.ON_MAILBOX,
            wait.started_at,
            wait.expires_at,
            target_mailbox=kind.address,
        )
    assert isinstance(kind, OnReply)
    return PendingWaitRecord(
        wait.wait_id,
        crew_id,
        PendingWaitKind.ON_REPLY,
        wait.started_at,
        wait.expires_at,
        correlation_id=kind.correlation,
    )


class _FinishedCrews(WriteGroup[tuple[str, tuple[tuple[str, str], ...]], None]):
    """Deletions of finished crews (:meth:`SqliteCrewStateStore.delete_async`): each item
    is a crew id and the ``(address, message_id)`` rows it consumed. A batch's crews take
    three statements per 64 crews (their ``processed_messages`` rows and mailbox marks, their snapshots with
    their pending waits by cascade), however many finished together, plus the
    acknowledgements: every SQLite call releases the GIL and the writer, the
    bottleneck of a burst of expiries, waits to get it back."""

    _CHUNK = 64

    def __init__(self) -> None:
        self._acks = mailboxes.AckGroup()

    def apply(
        self, conn: apsw.Connection, items: list[tuple[str, tuple[tuple[str, str], ...]]]
    ) -> list[BaseException | None]:
        crews = list(dict.fromkeys(crew for crew, _ in items))
        for start in range(0, len(crews), self._CHUNK):
            chunk = crews[start : start + self._CHUNK]
            marks = ", ".join(["?"] * len(chunk))
            conn.execute(f"DELETE FROM processed_messages WHERE crew_id IN ({marks})", chunk)
            conn.execute(f"DELETE FROM mailbox_marks WHERE crew_id IN ({marks})", chunk)
            conn.execute(f"DELETE FROM crew_snapshots WHERE crew_id IN ({marks})", chunk)
        consumed = [row for _, rows in items for row in rows]
        if consumed:
            self._acks.apply(conn, consumed)
        return [None] * len(items)


class _ActiveCrews(WriteGroup[tuple[str, str], None]):
    """Woken crews' rows committed ``Active`` (:meth:`SqliteCrewStateStore.mark_active_async`):
    each item is a crew id and the time it went Active; a burst of wakes takes one
    prepared statement per writer batch, not a request's transaction share each."""

    def apply(self, conn: apsw.Connection, items: list[tuple[str, str]]) -> list[BaseException | None]:
        conn.executemany(_MARK_ACTIVE, [(now, crew) for crew, now in items])
        return [None] * len(items)


class SqliteCrewStateStore:
    """The :class:`~orkeon_actors.lifecycle.ports.CrewStateStore` of a durable hub.

    ``save``/``delete`` block their caller until committed (never call them from an
    actor thread); :meth:`save_async` is the non-blocking form the supervisor uses.
    Fault point ``lifecycle.save`` is hit inside the save transaction (crash tests and
    injected failures)."""

    def __init__(self, hub: SqliteEventHub) -> None:
        self.hub = hub
        self._finished = _FinishedCrews()
        self._active = _ActiveCrews()

    def _save_work(
        self,
        crew_id: CrewId,
        snapshot: CrewSnapshot,
        processed: Sequence[str],
        state: CrewState,
        consumed: Sequence[tuple[str, str]] = (),
        kept_upto: int = 0,
        reflected: Sequence[str] = (),
    ) -> Callable[[apsw.Connection], None]:
        body = to_json(snapshot).encode()
        now = format_time(self.hub.clock.now())
        row = (
            str(crew_id),
            body,
            snapshot.mode,
            snapshot.schema_version,
            format_time(snapshot.snapshot_at),
            state.value,
        )
        waits = [to_row(wait_record(crew_id, w)) for w in snapshot.pending_waits]
        key = str(crew_id)
        done = list(processed)  # triggers: order does not imply processing, a row each
        # A sleep's and a checkpoint's cursors are durable from this commit; a failed crew has none.
        cursors = snapshot_cursors(snapshot) if state is not CrewState.FAILED else []

        def work(conn: apsw.Connection) -> None:
            conn.execute(UPSERT_SNAPSHOT, row)
            conn.execute("DELETE FROM pending_waits WHERE crew_id = ?", (key,))
            if waits:
                conn.executemany(PUT_WAIT, waits)
            cursor_events.replace_cursors(conn, key, cursors)
            cursor_events.delete_kept(conn, key, kept_upto)
            cursor_events.delete_reflected(conn, key, reflected)
            if done:
                conn.executemany(_PROCESSED, [(message_id, key, now) for message_id in done])
            if consumed:
                marks.advance_marks(conn, key, consumed, now)  # before the rows it reads go
                mailboxes.delete_messages(conn, consumed)
            faults.hit("lifecycle.save")

        return work

    def save(self, crew_id: CrewId, snapshot: CrewSnapshot) -> None:
        """Write ``snapshot`` and its pending waits (state ``Asleep``); blocks until committed."""
        self.hub.writer.execute(self._save_work(crew_id, snapshot, (), CrewState.ASLEEP))

    def save_async(
        self,
        crew_id: CrewId,
        snapshot: CrewSnapshot,
        processed: Sequence[str],
        on_saved: Callable[[], None],
        on_error: Callable[[BaseException], None],
        state: CrewState = CrewState.ASLEEP,
        *,
        consumed: Sequence[tuple[str, str]] = (),
        kept_upto: int = 0,
        reflected: Sequence[str] = (),
        checkpoint: bool = False,
    ) -> None:
        """Queue the save without waiting: ``on_saved`` runs on the writer thread after
        the commit, ``on_error`` with the error if the transaction failed (nothing
        written). A ``checkpoint`` commits the row as ``Active`` (the crew runs on), so a
        read-only view never calls a running crew asleep. ``consumed`` are the
        ``(mailbox address, message id)`` rows the snapshot reflects: deleted
        (acknowledged) in the same transaction, as are the kept cursor events up to
        ``kept_upto`` (handed over at its last wake) and those of the topic messages in
        ``reflected`` (its cursors handed them out or hold them)."""
        self.hub.writer.post(
            self._save_work(
                crew_id, snapshot, processed, CrewState.ACTIVE if checkpoint else state, consumed, kept_upto, reflected
            ),
            after_commit=lambda _: on_saved(),
            on_error=on_error,
        )

    def mark_active_async(self, crew_id: CrewId) -> None:
        """Commit ``crew_id``'s row as ``Active`` with ``snapshot_at`` now (the column is
        when the row's state was committed; the snapshot's own time stays in its body),
        queued in the bulk lane under a key of its own: it commits before any later save
        (keyless) or deletion (bulk, queued after it) of the crew, and never holds up the
        wake's urgent read of the crew's kept events (a shared key would demote that read
        behind it and its commit). A crew without a row (never snapshotted) gets none. A
        failure is logged: the crew runs on and the view shows the state before."""
        key = str(crew_id)
        self.hub.writer.post_in(
            self._active,
            (key, format_time(self.hub.clock.now())),
            on_error=lambda exc: logger.error("crew {}: its Active state was not committed: {}", crew_id, exc),
            key=f"crew-state {key}",
        )

    def stored_state(self, crew_id: CrewId) -> StoredState | None:
        """What the store holds of ``crew_id``: ``ASLEEP``, ``FAILED`` (kept for audit)
        or ``None``."""
        record = self.hub.load_snapshot(crew_id)
        if record is None:
            return None
        return StoredState.FAILED if record.state is CrewState.FAILED else StoredState.ASLEEP

    def is_processed(self, message_id: str, crew_id: CrewId) -> bool:
        """Whether ``crew_id`` committed the processing of ``message_id``."""
        return self.hub.is_processed(message_id, crew_id)

    def load(self, crew_id: CrewId) -> CrewSnapshot | None:
        """The crew's last snapshot, or ``None``. Raises ``SnapshotVersionError`` for a
        snapshot this release cannot read."""
        record = self.hub.load_snapshot(crew_id)
        if record is None:
            return None
        return from_json(record.snapshot.decode())

    def load_many(self, crew_ids: Sequence[CrewId]) -> dict[CrewId, str]:
        """The snapshot texts (:func:`~orkeon_actors.crew.snapshot.to_json`) of those of
        ``crew_ids`` that have a snapshot, read at once; decode each with
        :func:`~orkeon_actors.crew.snapshot.from_json` (``SnapshotVersionError`` for one
        this release cannot read: the others are unaffected)."""
        return {CrewId(c): text for c, text in self.hub.snapshot_texts(crew_ids).items()}

    def delete(self, crew_id: CrewId) -> None:
        """Delete the crew's snapshot, its waits and its processed rows; blocks."""
        self.hub.writer.execute(lambda conn: delete_crew(conn, str(crew_id)))

    def delete_async(
        self,
        crew_id: CrewId,
        consumed: Sequence[tuple[str, str]] = (),
        on_deleted: Callable[[], None] | None = None,
    ) -> None:
        """Queue the deletion of a finished crew (snapshot, waits, processed rows) and,
        in the same transaction, the acknowledgement of the ``consumed`` mailbox rows
        its final state reflects; ``on_deleted`` runs after the commit. A crash before
        the commit leaves the crew on its last snapshot with those messages kept: it is
        woken again and finishes again."""
        crew = str(crew_id)
        self.hub.writer.post_in(
            self._finished,
            (crew, tuple(consumed)),
            after_commit=None if on_deleted is None else lambda _: on_deleted(),
            key=(crew_key(crew), *{address for address, _ in consumed}),  # orders as its acks would
        )

    def mark_failed_async(self, crew_id: CrewId, snapshot: CrewSnapshot) -> None:
        """Keep a failed crew for audit (state ``Failed``, no pending waits)."""
        work = self._save_work(crew_id, snapshot, (), CrewState.FAILED)

        def fail(conn: apsw.Connection) -> None:
            work(conn)
            conn.execute("DELETE FROM pending_waits WHERE crew_id = ?", (str(crew_id),))

        self.hub.writer.post(fail)
