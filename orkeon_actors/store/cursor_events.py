"""Topic events kept for the cursors of sleeping crews (schema version 4).

A crew agent's ``wait_for_event`` cursors are data in its snapshot. While the crew
sleeps only its parked waits wake it, so an event for one of its *other* cursors would
be lost (an awake crew's cursor would have buffered it). The store keeps it instead:

* ``sleeping_cursors``: one row per distinct ``(topic, metadata_match)`` cursor of a
  sleeping crew, written with its snapshot (replaced at every snapshot, deleted with
  the crew by the ``crew_snapshots`` cascade) and indexed by topic, so the supervisor
  finds the crews an event is for without holding every sleeping cursor in memory;
* ``cursor_events``: the events kept for those cursors, one row per cursor matched, in
  the order they were written (``seq``). Bounded per cursor: beyond
  :data:`MAX_KEPT` rows the oldest are deleted and counted in ``missed``.

On a wake the rows are read (through the writer, after every earlier write) and handed
over to the restored cursors, oldest first; they are deleted by the transaction of the
crew's next snapshot (or its completion), so a crash while the crew is awake hands them
over again to the crew restored from its previous snapshot: reflected once.

While the crew is live again, the events matching the cursors of its last snapshot are
kept the same way (``CrewSupervisor``: written before the publish routes them, committed
before ``publish`` returns), so a crash restores the crew from that snapshot with every
event it had not yet reflected in one: the next snapshot deletes those its cursors
handed out or hold (:func:`delete_reflected`) with the ones handed over at the wake
(:func:`delete_kept`).

Only events published while the process runs are kept (publishes are live-only).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import apsw

from orkeon_actors.model.message import FrozenMap, Message
from orkeon_actors.store.codec import ENVELOPE_COLUMNS, envelope, message_from_row, metadata_json

__all__ = ["MAX_KEPT", "cursor_key", "delete_kept", "delete_reflected", "keep_event", "load_kept", "replace_cursors"]

MAX_KEPT = 10_000
"""Events kept per sleeping cursor; older ones are dropped and counted as missed (the
same bound as a live cursor's ``max_buffered`` default)."""

_COLUMNS = ", ".join(ENVELOPE_COLUMNS)
_INSERT = (
    f"INSERT INTO cursor_events (crew_id, cursor_key, {_COLUMNS}) "
    f"SELECT ?, ?, {', '.join('?' * len(ENVELOPE_COLUMNS))} "
    "WHERE EXISTS (SELECT 1 FROM sleeping_cursors WHERE crew_id = ?1 AND cursor_key = ?2)"
)


def cursor_key(topic: str, metadata_match: FrozenMap | None) -> str:
    """The key of a cursor: its topic pattern and its canonical metadata match."""
    return f"{topic}\n{metadata_json(metadata_match)}"


def replace_cursors(conn: apsw.Connection, crew_id: str, cursors: Iterable[tuple[str, FrozenMap | None]]) -> None:
    """Index the crew's cursors as of its snapshot (its previous rows replaced)."""
    conn.execute("DELETE FROM sleeping_cursors WHERE crew_id = ?", (crew_id,))
    rows = {cursor_key(t, m): (crew_id, cursor_key(t, m), t, metadata_json(m)) for t, m in cursors}
    if rows:
        conn.executemany(
            "INSERT INTO sleeping_cursors (crew_id, cursor_key, topic, metadata_match) VALUES (?, ?, ?, ?)",
            list(rows.values()),
        )


def keep_event(
    conn: apsw.Connection, crew_id: str, keys: Sequence[str], message: Message, limit: int = MAX_KEPT
) -> None:
    """Keep ``message`` for the crew's cursors ``keys`` (those still indexed), each
    bounded to ``limit`` rows (the oldest dropped, counted as missed)."""
    row = envelope(message)
    for key in keys:
        conn.execute(_INSERT, (crew_id, key, *row))
        if not conn.changes():
            continue
        row_count = conn.execute(
            "SELECT count(*) FROM cursor_events WHERE crew_id = ? AND cursor_key = ?", (crew_id, key)
        ).fetchone()
        excess = (int(row_count[0]) if row_count is not None else 0) - limit
        if excess > 0:
            conn.execute(
                "DELETE FROM cursor_events WHERE seq IN (SELECT seq FROM cursor_events WHERE crew_id = ? "
                "AND cursor_key = ? ORDER BY seq LIMIT ?)",
                (crew_id, key, excess),
            )
            conn.execute(
                "UPDATE sleeping_cursors SET missed = missed + ? WHERE crew_id = ? AND cursor_key = ?",
                (excess, crew_id, key),
            )


def load_kept(conn: apsw.Connection, crew_id: str) -> tuple[list[Message], dict[str, int], int]:
    """The events kept for the crew, oldest first, each once; the drops per cursor key;
    and the last ``seq`` read (``0``: none), for :func:`delete_kept`."""
    seen: set[str] = set()
    messages: list[Message] = []
    upto = 0
    for seq, *row in conn.execute(
        f"SELECT seq, {_COLUMNS} FROM cursor_events WHERE crew_id = ? ORDER BY seq", (crew_id,)
    ):
        upto = int(seq)
        if str(row[0]) not in seen:
            seen.add(str(row[0]))
            messages.append(message_from_row(row))
    missed = {
        str(key): int(n)
        for key, n in conn.execute(
            "SELECT cursor_key, missed FROM sleeping_cursors WHERE crew_id = ? AND missed > 0", (crew_id,)
        )
    }
    return messages, missed, upto


def delete_kept(conn: apsw.Connection, crew_id: str, upto: int) -> None:
    """Delete the crew's kept events up to ``seq`` ``upto`` (handed over, and reflected
    by the snapshot being written)."""
    if upto > 0:
        conn.execute("DELETE FROM cursor_events WHERE crew_id = ? AND seq <= ?", (crew_id, upto))


def delete_reflected(conn: apsw.Connection, crew_id: str, message_ids: Sequence[str]) -> None:
    """Delete the crew's kept events whose message is in ``message_ids`` (those the
    snapshot being written reflects: its cursors handed them out or hold them), in one
    pass over the crew's rows."""
    if message_ids:
        conn.execute(
            "DELETE FROM cursor_events WHERE crew_id = ? AND message_id IN (SELECT value FROM json_each(?))",
            (crew_id, json.dumps(list(message_ids))),
        )
