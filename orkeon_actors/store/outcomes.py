"""The ``crew_outcomes`` table: what each finished crew left behind, kept for its retention.

One row per finished crew: its status (``Completed`` / ``Failed``), its result, its failure
(JSON text), its final state (the snapshot codec's JSON) and when it finished (RFC 3339).
The lifecycle writes a row when a crew finishes and reads it when an outcome is asked for
after a restart; the purge deletes completed crews' rows older than
``PurgePolicy.outcome_retention`` and failed crews' rows older than ``failed_retention``
(spec §11.4). This module only moves rows: the lifecycle owns their meaning.
"""

from __future__ import annotations

import apsw
import attrs

__all__ = ["OutcomeRow", "delete_outcome", "load_outcome", "write_outcome"]


@attrs.frozen
class OutcomeRow:
    crew_id: str
    status: str
    result: str | None
    failure: str | None
    final_snapshot: str | None
    finished_at: str


_PUT = (
    "INSERT OR REPLACE INTO crew_outcomes (crew_id, status, result, failure, final_snapshot, finished_at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


def write_outcome(conn: apsw.Connection, row: OutcomeRow) -> None:
    """Insert (or replace) ``row``; runs inside the caller's transaction."""
    conn.execute(_PUT, (row.crew_id, row.status, row.result, row.failure, row.final_snapshot, row.finished_at))


def load_outcome(conn: apsw.Connection, crew_id: str) -> OutcomeRow | None:
    found = conn.execute(
        "SELECT crew_id, status, result, failure, final_snapshot, finished_at FROM crew_outcomes WHERE crew_id = ?",
        (crew_id,),
    ).fetchone()
    if found is None:
        return None
    return OutcomeRow(*(None if v is None else str(v) for v in found))  # type: ignore[arg-type]


def delete_outcome(conn: apsw.Connection, crew_id: str) -> None:
    conn.execute("DELETE FROM crew_outcomes WHERE crew_id = ?", (crew_id,))
