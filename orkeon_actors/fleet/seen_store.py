"""The replay seen-set kept in the host's store, so that replay protection survives a
restart (cross-host messaging design, §5: every message is checked against the ids this
host received while they are still valid).

The gateway's :class:`~orkeon_actors.fleet.signing.Verifier` keeps the ids of recent
messages in memory, each with the digest of what it carried and its ``expires_at``. Each
id it sees the first time is also written here (``fleet_seen``), queued before the store
is handed the message, under its own writer key (:data:`WRITE_KEY`: never a barrier to
other writes), so usually in the same group commit; a crash in the moment between the
message's commit and this row's leaves that one id unremembered (the receiving store
still deduplicates a message it holds). At boot, :func:`boot` deletes the rows whose expiry passed and
returns the others, which the verifier takes back before the gateway consumes anything:
a message captured before the restart and replayed after it is recognised, whether its
content is the same (an exact replay: dropped, counted, WARNING) or not (a replay under a
seen id: refused to ``fleet.dlx``). A row lives until its message expires, since past
that the verifier's expiry check refuses the message anyway; :func:`prune` deletes the
expired ones (each boot, then every :data:`PRUNE_EVERY` writes).

The table belongs to the fleet adapter (``CREATE TABLE IF NOT EXISTS`` at the first boot
as a fleet host), like ``fleet_requests`` (:mod:`~orkeon_actors.fleet.remote_requests`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import apsw
import attrs

__all__ = ["PRUNE_EVERY", "WRITE_KEY", "Seen", "boot", "prune", "remember"]

WRITE_KEY: Final = "fleet_seen"
"""The writer key of the seen-set's writes: FIFO among themselves, not a barrier to
other writes."""
PRUNE_EVERY: Final = 1_000
"""Writes between two deletions of expired rows."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fleet_seen (
    message_id    TEXT PRIMARY KEY,
    digest        BLOB NOT NULL,
    expires_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
"""


@attrs.frozen
class Seen:
    """A message id this host received, the digest of what it carried, its expiry."""

    message_id: str
    digest: bytes
    expires_at_ms: int


def boot(conn: apsw.Connection, now_ms: int) -> list[Seen]:
    """Create the table if needed, delete the expired rows, return the others (oldest
    expiry first)."""
    conn.execute(_SCHEMA)
    prune(conn, now_ms)
    rows = conn.execute("SELECT message_id, digest, expires_at_ms FROM fleet_seen ORDER BY expires_at_ms")
    return [Seen(str(message_id), bytes(digest), int(expires)) for message_id, digest, expires in rows]


def remember(conn: apsw.Connection, seen: Sequence[Seen]) -> None:
    conn.executemany(
        "INSERT OR IGNORE INTO fleet_seen VALUES (?, ?, ?)",
        [(entry.message_id, entry.digest, entry.expires_at_ms) for entry in seen],
    )


def prune(conn: apsw.Connection, now_ms: int) -> None:
    conn.execute("DELETE FROM fleet_seen WHERE expires_at_ms <= ?", (now_ms,))
