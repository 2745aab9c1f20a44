"""Retained last values (``PublishOptions.retain_as_last_value``), kept in ``last_values``.

One row per ``(scope, key)``: ``scope`` is the target crew id, or ``''`` for the global
slot. A retain is acknowledged after its row committed, so a retained value survives a
restart; the hub reloads every row into memory when it opens the store.
"""

from __future__ import annotations

import apsw

from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.store.codec import ENVELOPE_COLUMNS, converter, envelope, message_from_row

__all__ = ["retain", "load_all"]

_COLUMNS = ", ".join(ENVELOPE_COLUMNS)
_UPSERT = (
    f"INSERT OR REPLACE INTO last_values (scope, key, {_COLUMNS}) "
    f"VALUES (?, ?, {', '.join('?' for _ in ENVELOPE_COLUMNS)})"
)


def retain(conn: apsw.Connection, scope: CrewId | None, key: str, message: Message) -> None:
    conn.execute(_UPSERT, (scope or "", key, *envelope(message)))


def load_all(conn: apsw.Connection) -> dict[tuple[CrewId | None, str], Message]:
    out: dict[tuple[CrewId | None, str], Message] = {}
    for row in conn.execute(f"SELECT scope, key, {_COLUMNS} FROM last_values"):
        scope = converter.structure(row[0], CrewId) if row[0] else None
        out[(scope, str(row[1]))] = message_from_row(row[2:])
    return out
