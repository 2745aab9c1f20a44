"""Durable mailboxes: the ``mailboxes`` rows and the ``mailbox_registry``.

A mailbox address is *durably registered* from its first ``register_mailbox`` until its
registration is closed: posts to it are accepted (and kept) even while no runtime holds
it live, for example between a crash and the restart that registers it again. Its rows
come back in ``seq`` order, the order the writer accepted them: per-mailbox FIFO across
restarts.

Every function takes the writer's (or a reader's) connection; none commits.
"""

from __future__ import annotations

import functools
import itertools
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import apsw

from orkeon_actors.errors import MailboxNotFoundError
from orkeon_actors.model.message import Message
from orkeon_actors.store.codec import envelope_columns, format_time, message_from_row
from orkeon_actors.store.writer import WriteGroup

__all__ = [
    "AckGroup",
    "InsertGroup",
    "RegistryCache",
    "insert_message",
    "insert_params",
    "insert_prepared",
    "insert_rows",
    "load_messages",
    "delete_message",
    "delete_messages",
    "register",
    "register_many",
    "unregister",
    "is_registered",
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

_INSERT_ROWS = (
    "INSERT INTO mailboxes (mailbox_address, message_id, payload, metadata, received_at, topic, source_crew_id, "
    "source_agent_id, target_crew_id, correlation_id, schema_id, seq, published_at) VALUES "
)
_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_ROWS_PER_STATEMENT = 64


@functools.lru_cache(maxsize=_ROWS_PER_STATEMENT)
def _insert_rows_sql(rows: int) -> str:
    return _INSERT_ROWS + ", ".join([_ROW] * rows)


@functools.lru_cache(maxsize=_ROWS_PER_STATEMENT)
def _delete_ids_sql(ids: int) -> str:
    return f"DELETE FROM mailboxes WHERE mailbox_address = ? AND message_id IN ({', '.join(['?'] * ids)})"


_DELETE = "DELETE FROM mailboxes WHERE mailbox_address = ? AND message_id = ?"


class RegistryCache:
    """The durable registry as the writer sees it *inside* its transactions, without
    holding it in memory: a bounded, least-recently-used set of addresses known to be
    registered, backed by a lookup on the writer's own connection on a miss (so it sees
    the registrations of the transaction in progress). Register and unregister work
    update it as they write; a rolled-back transaction clears it (:meth:`reload` is a
    writer ``on_rollback`` hook), since it may hold an address whose registration was
    rolled back. Only positive answers are cached: a miss always asks SQLite, so an
    address registered by another path is never refused. Writer thread only.

    ``capacity`` bounds the memory it holds, whatever the size of ``mailbox_registry``
    (a million sleeping crews' mailboxes stay in SQLite)."""

    def __init__(self, capacity: int = 65_536) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._known: OrderedDict[str, None] = OrderedDict()

    def contains(self, conn: apsw.Connection, address: str) -> bool:
        """Whether ``address`` is durably registered (as of the writer's transaction)."""
        known = self._known
        if address in known:
            known.move_to_end(address)
            return True
        if not is_registered(conn, address):
            return False
        self.add(address)
        return True

    def add(self, address: str) -> None:
        known = self._known
        known[address] = None
        known.move_to_end(address)
        if len(known) > self.capacity:
            known.popitem(last=False)

    def discard(self, address: str) -> None:
        self._known.pop(address, None)

    def reload(self, conn: apsw.Connection) -> None:
        self._known.clear()

    def __len__(self) -> int:
        return len(self._known)


class InsertGroup(WriteGroup[tuple[str, tuple[Any, ...]], int]):
    """Durable posts, many per ``executemany``: items are ``(address, insert_params)``;
    each one's result is the sequence number it was kept with (taken in item order). An
    item whose address is not durably registered fails alone with
    ``MailboxNotFoundError``."""

    def __init__(self, registry: RegistryCache, seq: Iterator[int]) -> None:
        self._registry = registry
        self._seq = seq

    def apply(self, conn: apsw.Connection, items: list[tuple[str, tuple[Any, ...]]]) -> list[int | BaseException]:
        registry = self._registry
        seq = self._seq
        rows: list[tuple[Any, ...]] = []
        outcomes: list[int | BaseException] = []
        for address, params in items:
            if registry.contains(conn, address):
                number = next(seq)
                rows.append((*params, number, params[4]))
                outcomes.append(number)
            else:
                outcomes.append(MailboxNotFoundError(address))
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            chunk = rows[start : start + _ROWS_PER_STATEMENT]
            conn.execute(_insert_rows_sql(len(chunk)), [value for row in chunk for value in row])
        return outcomes

    def atomic(self, items: list[tuple[str, tuple[Any, ...]]]) -> bool:
        return len(items) <= _ROWS_PER_STATEMENT


def insert_rows(conn: apsw.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert mailbox rows (each :func:`insert_params` plus its ``seq`` and its
    ``published_at``), many per statement, for a caller that checked the registry."""
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        chunk = rows[start : start + _ROWS_PER_STATEMENT]
        conn.execute(_insert_rows_sql(len(chunk)), [value for row in chunk for value in row])


class AckGroup(WriteGroup[tuple[str, str], None]):
    """Acknowledgements: items are ``(address, message_id)`` rows to delete, one
    statement per address (deleting a row that is already gone is not an error)."""

    def apply(self, conn: apsw.Connection, items: list[tuple[str, str]]) -> list[BaseException | None]:
        by_address: dict[str, list[str]] = {}
        for address, message_id in items:
            by_address.setdefault(address, []).append(message_id)
        for address, ids in by_address.items():
            for start in range(0, len(ids), _ROWS_PER_STATEMENT):
                chunk = ids[start : start + _ROWS_PER_STATEMENT]
                conn.execute(_delete_ids_sql(len(chunk)), (address, *chunk))
        return [None] * len(items)

    def atomic(self, items: list[tuple[str, str]]) -> bool:
        return len(items) <= _ROWS_PER_STATEMENT and len({address for address, _ in items}) == 1


class UnregisterGroup(WriteGroup[Sequence[str], None]):
    """Unregistrations: each item is the addresses one close forgets (their rows and
    registry entries deleted); a batch's items take two statements per
    ``_ROWS_PER_STATEMENT`` addresses, whatever the number of closes (the registry cache
    forgets them too)."""

    def __init__(self, registry: RegistryCache) -> None:
        self._registry = registry

    def apply(self, conn: apsw.Connection, items: list[Sequence[str]]) -> list[BaseException | None]:
        keys = list(dict.fromkeys(key for item in items for key in item))
        for start in range(0, len(keys), _ROWS_PER_STATEMENT):
            chunk = keys[start : start + _ROWS_PER_STATEMENT]
            marks = ", ".join(["?"] * len(chunk))
            conn.execute(f"DELETE FROM mailboxes WHERE mailbox_address IN ({marks})", chunk)
            conn.execute(f"DELETE FROM mailbox_registry WHERE address IN ({marks})", chunk)
        for key in keys:
            self._registry.discard(key)
        return [None] * len(items)


_INSERT_COLUMNS: Final = (
    "message_id",
    "payload",
    "metadata",
    "published_at",
    "topic",
    "source_crew_id",
    "source_agent_id",
    "target_crew_id",
    "correlation_id",
    "schema_id",
)
"""The envelope columns a mailbox row keeps, in the order of :func:`insert_params`
(``published_at`` is also the row's ``received_at``)."""


def insert_params(address: str, message: Message) -> tuple[Any, ...]:
    """A message's row but its sequence, computed off the writer thread (the
    bottleneck of durable posts): ``(address, id, payload, metadata, received_at, topic,
    source_crew_id, source_agent_id, target_crew_id, correlation_id, schema_id)``, the
    values in the store's row format (:func:`~orkeon_actors.store.codec.envelope_columns`)."""
    columns = envelope_columns(message)
    return (address, *[columns[name] for name in _INSERT_COLUMNS])


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


def load_messages_of(conn: apsw.Connection, addresses: Sequence[str]) -> dict[str, list[Message]]:
    """Every message kept for each of ``addresses`` (those with none are absent), each
    list oldest first: one statement for all of them."""
    if len(addresses) == 1:
        [address] = addresses
        messages = load_messages(conn, address)
        return {address: messages} if messages else {}
    kept: dict[str, list[Message]] = {}
    marks = ", ".join("?" * len(addresses))
    for row in conn.execute(_LOAD_MANY.format(marks=marks), tuple(addresses)):
        kept.setdefault(str(row[5]), []).append(message_from_row(row))
    return kept


_LOAD_MANY = _LOAD.replace(
    "mailbox_address = ? ORDER BY seq", "mailbox_address IN ({marks}) ORDER BY mailbox_address, seq"
)


def delete_message(conn: apsw.Connection, address: str, message_id: str) -> None:
    conn.execute(_DELETE, (address, message_id))


def delete_messages(conn: apsw.Connection, rows: Iterable[tuple[str, str]]) -> None:
    """Delete ``(address, message_id)`` rows (acknowledgements, batched)."""
    conn.executemany(_DELETE, rows)


_REGISTER = "INSERT OR IGNORE INTO mailbox_registry(address, registered_at) VALUES (?, ?)"


def register(conn: apsw.Connection, address: str, now: Any) -> None:
    conn.execute(_REGISTER, (address, format_time(now)))


def register_many(conn: apsw.Connection, addresses: Iterable[str], now_text: str) -> None:
    """Register ``addresses`` (already registered ones are left as they are) at
    ``now_text`` (a :func:`~orkeon_actors.store.codec.format_time` text)."""
    conn.executemany(_REGISTER, [(address, now_text) for address in addresses])


def unregister(conn: apsw.Connection, address: str) -> int:
    """Forget ``address`` and delete its rows; returns how many rows were deleted."""
    conn.execute("DELETE FROM mailboxes WHERE mailbox_address = ?", (address,))
    deleted = conn.changes()
    conn.execute("DELETE FROM mailbox_registry WHERE address = ?", (address,))
    return deleted


def is_registered(conn: apsw.Connection, address: str) -> bool:
    """Whether ``address`` has a ``mailbox_registry`` row (one primary-key lookup)."""
    return conn.execute("SELECT 1 FROM mailbox_registry WHERE address = ?", (address,)).fetchone() is not None


def registered_among(conn: apsw.Connection, addresses: Sequence[str]) -> set[str]:
    """Which of ``addresses`` have a ``mailbox_registry`` row (one statement)."""
    marks = ", ".join("?" * len(addresses))
    rows = conn.execute(f"SELECT address FROM mailbox_registry WHERE address IN ({marks})", tuple(addresses))
    return {str(row[0]) for row in rows}


def registered_addresses(conn: apsw.Connection) -> list[str]:
    """Every durably registered address (a full read: for tests and tools, never on a
    hot path)."""
    return [str(row[0]) for row in conn.execute("SELECT address FROM mailbox_registry")]


def next_sequence(conn: apsw.Connection) -> itertools.count[int]:
    """A counter continuing after every ``seq`` used in ``mailboxes`` and ``outbox``."""
    row = conn.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM mailboxes), 0), coalesce((SELECT max(seq) FROM outbox), 0))"
    ).fetchone()
    return itertools.count(int(row[0]) + 1 if row is not None else 1)
