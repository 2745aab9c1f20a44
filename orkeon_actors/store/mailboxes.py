"""Durable mailboxes: the ``mailboxes`` rows and the ``mailbox_registry``.

A mailbox address is *durably registered* from its first ``register_mailbox`` until its
registration is closed: posts to it are accepted (and kept) even while no runtime holds
it live, for example between a crash and the restart that registers it again. Its rows
come back in ``seq`` order, the order the writer accepted them: per-mailbox FIFO across
restarts.

Every function takes the writer's (or a reader's) connection; none commits.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import apsw

from orkeon_actors.model.message import Message
from orkeon_actors.store.codec import format_time, message_from_row, metadata_json

__all__ = [
    "insert_message",
    "insert_params",
    "insert_prepared",
    "load_messages",
    "delete_message",
    "delete_messages",
    "register",
    "unregister",
    "registered_addresses",
    "next_sequence",
]

_INSERT = """
INSERT INTO mailboxes (mailbox_address, message_id, payload, metadata, received_at, seq, topic,
                       source_crew_id, source_agent_id, target_crew_id, correlation_id, published_at, schema_id)
SELECT ?1, ?2, ?3, ?4, ?5, ?12, ?6, ?7, ?8, ?9, ?10, ?5, ?11
WHERE EXISTS (SELECT 1 FROM mailbox_registry WHERE address = ?1)
"""

_LOAD = """
SELECT message_id, topic, source_crew_id, source_agent_id, target_crew_id, mailbox_address, correlation_id,
       coalesce(published_at, received_at), metadata, payload, schema_id
FROM mailboxes WHERE mailbox_address = ? ORDER BY seq
"""

_DELETE = "DELETE FROM mailboxes WHERE mailbox_address = ? AND message_id = ?"


def insert_params(address: str, message: Message) -> tuple[Any, ...]:
    """The parameters of :func:`insert_prepared` but the sequence (computed off the
    writer thread, which is the bottleneck of durable posts)."""
    return (
        address,
        message.id,
        message.payload,
        metadata_json(message.metadata),
        format_time(message.published_at),
        message.topic,
        message.source_crew_id,
        message.source_agent_id,
        message.target_crew_id,
        message.correlation_id,
        message.schema_id,
    )


def insert_prepared(conn: apsw.Connection, params: tuple[Any, ...], seq: int) -> bool:
    """Append a message (``params`` from :func:`insert_params`) with sequence ``seq``.
    Returns ``False`` (nothing written) when its address is not durably registered."""
    conn.execute(_INSERT, (*params, seq))
    return bool(conn.changes())


def insert_message(conn: apsw.Connection, address: str, message: Message, seq: int) -> bool:
    """Append ``message`` to the mailbox at ``address`` with sequence ``seq``. Returns
    ``False`` (nothing written) when the address is not durably registered."""
    return insert_prepared(conn, insert_params(address, message), seq)


def load_messages(conn: apsw.Connection, address: str) -> list[Message]:
    """Every message kept for ``address``, oldest first."""
    return [message_from_row(row) for row in conn.execute(_LOAD, (address,))]


def delete_message(conn: apsw.Connection, address: str, message_id: str) -> None:
    conn.execute(_DELETE, (address, message_id))


def delete_messages(conn: apsw.Connection, rows: Iterable[tuple[str, str]]) -> None:
    """Delete ``(address, message_id)`` rows (acknowledgements, batched)."""
    conn.executemany(_DELETE, rows)


def register(conn: apsw.Connection, address: str, now: Any) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO mailbox_registry(address, registered_at) VALUES (?, ?)", (address, format_time(now))
    )


def unregister(conn: apsw.Connection, address: str) -> int:
    """Forget ``address`` and delete its rows; returns how many rows were deleted."""
    conn.execute("DELETE FROM mailboxes WHERE mailbox_address = ?", (address,))
    deleted = conn.changes()
    conn.execute("DELETE FROM mailbox_registry WHERE address = ?", (address,))
    return deleted


def registered_addresses(conn: apsw.Connection) -> list[str]:
    return [str(row[0]) for row in conn.execute("SELECT address FROM mailbox_registry")]


def next_sequence(conn: apsw.Connection) -> itertools.count[int]:
    """A counter continuing after every ``seq`` used in ``mailboxes`` and ``outbox``."""
    row = conn.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM mailboxes), 0), coalesce((SELECT max(seq) FROM outbox), 0))"
    ).fetchone()
    return itertools.count(int(row[0]) + 1 if row is not None else 1)
