"""The transactional outbox (spec §11.3) and its dispatcher actor.

A unit of work writes its outgoing messages into ``outbox`` (state ``Pending``) in the
same transaction as its ``processed_messages`` row and its state. Once that commits, the
:class:`OutboxDispatcher` actor delivers them:

* a **post** moves into the target's durable mailbox and its outbox row becomes
  ``Dispatched`` *in one transaction* (with its sender's sent row, for an agent's
  post): a crash leaves it either still pending (it is dispatched again at the next
  boot) or delivered, never both, never neither. Then it
  is handed to the live mailbox, in commit order. A post whose mailbox is no longer
  registered is marked ``Failed`` (with the reason in ``error``) and logged;
* a **post** to a mailbox on another host (a fleet host's hub sets ``forward_post``) is
  handed to the broker first and marked ``Dispatched`` once the broker confirmed it; one
  the broker cannot take now stays ``Pending`` (dispatched again at the next boot);
* a **publish** is routed to the live subscribers, then marked ``Dispatched`` (with its
  retained last value, if any, and, for an agent's ``topic://`` post, its sender's sent
  row). A crash between the two re-publishes it at the next boot: at-least-once, as
  subscribers are not durable (the sender still gets one row).

At boot, every ``Pending`` row is dispatched again, in its original order. The
dispatcher never blocks: it hands its writes to the writer and goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import apsw
import attrs
import pykka
from loguru import logger

from orkeon_actors.errors import BrokerError, MailboxNotFoundError
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.store import faults, mailboxes
from orkeon_actors.store.codec import envelope_columns, message_from_row, parse_time
from orkeon_actors.store.last_values import retain
from orkeon_actors.store.records import OutboxRecord, OutboxState
from orkeon_actors.store.writer import StoreWriter

__all__ = ["OutboxDispatcher", "OutboxHost", "insert_outbox", "load_pending", "POST", "PUBLISH"]

POST = "post"
PUBLISH = "publish"

_INSERT = """
INSERT INTO outbox (message_id, source_crew_id, target_mailbox, target_crew_id, topic, payload, metadata,
                    created_at, dispatched_at, state, seq, kind, source_agent_id, correlation_id, schema_id,
                    last_value_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 'Pending', ?, ?, ?, ?, ?, ?)
"""

_INSERT_COLUMNS: Final = (
    "message_id",
    "source_crew_id",
    "target_mailbox",
    "target_crew_id",
    "topic",
    "payload",
    "metadata",
    "published_at",
    "source_agent_id",
    "correlation_id",
    "schema_id",
)
"""The envelope columns an outbox row keeps, in :data:`_INSERT`'s order around ``seq``
and ``kind`` (``published_at`` is the row's ``created_at``)."""

_SELECT = """
SELECT seq, kind, state, created_at, dispatched_at, last_value_key, error,
       message_id, topic, source_crew_id, source_agent_id, target_crew_id, target_mailbox, correlation_id,
       created_at, metadata, payload, schema_id
FROM outbox
"""


def insert_outbox(
    conn: apsw.Connection, seq: int, kind: str, message: Message, last_value_key: str | None
) -> OutboxRecord:
    """Write one pending outbox row; returns its record."""
    columns = envelope_columns(message)
    conn.execute(
        _INSERT,
        (
            *[columns[name] for name in _INSERT_COLUMNS[:8]],
            seq,
            kind,
            *[columns[name] for name in _INSERT_COLUMNS[8:]],
            last_value_key,
        ),
    )
    return OutboxRecord(seq, kind, message, OutboxState.PENDING, message.published_at, None, last_value_key)


def _record(row: Sequence[Any]) -> OutboxRecord:
    return OutboxRecord(
        int(row[0]),
        str(row[1]),
        message_from_row(row[7:]),
        OutboxState(row[2]),
        parse_time(row[3]),
        None if row[4] is None else parse_time(row[4]),
        row[5],
        row[6],
    )


def load_pending(conn: apsw.Connection) -> list[OutboxRecord]:
    """Every ``Pending`` row, oldest first."""
    return [_record(row) for row in conn.execute(_SELECT + " WHERE state = 'Pending' ORDER BY seq")]


def load_all(conn: apsw.Connection) -> list[OutboxRecord]:
    return [_record(row) for row in conn.execute(_SELECT + " ORDER BY seq")]


class OutboxHost(Protocol):
    """What the dispatcher needs from the durable hub."""

    writer: StoreWriter

    def next_seq(self) -> int: ...

    def now_text(self) -> str: ...

    def route_live(self, message: Message) -> None: ...

    def deliver_live(self, message: Message, seq: int) -> None: ...

    def remember_last_value(self, scope: CrewId | None, key: str, message: Message) -> None: ...

    def outbox_dispatched(self) -> None: ...

    def sent_outgoing(self, conn: apsw.Connection, message: Message, *, delivered: bool) -> None:
        """In the dispatch transaction: the post ``message`` was kept in its mailbox
        (``delivered``) or failed for good; its sender's history completes (or drops) the
        intent its unit of work reserved."""
        ...

    forward_post: Callable[[Message], bool] | None
    """Hands a post for a mailbox on another host to the broker (``True``: forwarded and
    confirmed; ``False``: the mailbox is local); ``None`` on a hub of one host."""


@attrs.frozen
class _Dispatch:
    records: tuple[OutboxRecord, ...]


@attrs.frozen
class DispatchOutcome:
    """What one dispatch transaction did."""

    delivered: tuple[tuple[Message, int], ...] = ()
    retained: tuple[OutboxRecord, ...] = ()
    failed: tuple[tuple[OutboxRecord, str], ...] = ()


def _dispatch_work(host: OutboxHost, records: tuple[OutboxRecord, ...], forwarded: frozenset[str] = frozenset()) -> Any:
    def work(conn: apsw.Connection) -> DispatchOutcome:
        now = host.now_text()
        delivered: list[tuple[Message, int]] = []
        retained: list[OutboxRecord] = []
        failed: list[tuple[OutboxRecord, str]] = []
        for record in records:
            message = record.message
            conn.execute(
                "UPDATE outbox SET state = 'Dispatched', dispatched_at = ? WHERE message_id = ? AND state = 'Pending'",
                (now, message.id),
            )
            if not conn.changes():
                continue  # already dispatched (or failed) by an earlier dispatch
            if record.kind == POST and message.id in forwarded:
                # The broker confirmed it to the mailbox's host: dispatched, and the
                # sender's intent completes on that confirm (docs/history.md).
                host.sent_outgoing(conn, message, delivered=True)
                continue
            if record.kind == POST:
                address = message.target_mailbox
                seq = host.next_seq()
                if address is None or not mailboxes.insert_message(conn, str(address), message, seq):
                    reason = f"no mailbox is registered at {address}"
                    conn.execute(
                        "UPDATE outbox SET state = 'Failed', dispatched_at = NULL, error = ? WHERE message_id = ?",
                        (reason, message.id),
                    )
                    failed.append((record, reason))
                    host.sent_outgoing(conn, message, delivered=False)
                    continue
                host.sent_outgoing(conn, message, delivered=True)
                delivered.append((message, seq))
                if len(delivered) == 1:
                    faults.hit("outbox.mid_dispatch")
            else:
                # Routed before this transaction: an agent's topic post completes its row.
                host.sent_outgoing(conn, message, delivered=True)
                if record.last_value_key is not None:
                    retain(conn, message.target_crew_id, record.last_value_key, message)
                    retained.append(record)
        return DispatchOutcome(tuple(delivered), tuple(retained), tuple(failed))

    return work


def _settle_dispatch(host: OutboxHost, outcome: DispatchOutcome) -> None:
    """After a dispatch committed (writer thread): hand posts to live mailboxes in
    commit order, remember retained values, report failures."""
    for message, seq in outcome.delivered:
        try:
            host.deliver_live(message, seq)
        except Exception:  # kept in the store: a later registration reloads it
            logger.opt(exception=True).warning("outbox message {} is kept but was not handed over live", message.id)
    for record in outcome.retained:
        if record.last_value_key is not None:
            host.remember_last_value(record.message.target_crew_id, record.last_value_key, record.message)
    for record, reason in outcome.failed:
        logger.warning("outbox message {} could not be dispatched: {}", record.message.id, reason)
    host.outbox_dispatched()


def _forward_remote_posts(
    host: OutboxHost, records: tuple[OutboxRecord, ...]
) -> tuple[frozenset[str], tuple[OutboxRecord, ...]]:
    """Forward the posts for mailboxes on other hosts (each confirmed by the broker):
    their ids, and the records this dispatch still handles (a post that could not be
    forwarded now, the broker being unreachable, stays pending for the next boot)."""
    forward = host.forward_post
    if forward is None:
        return frozenset(), records
    forwarded: set[str] = set()
    kept: list[OutboxRecord] = []
    for record in records:
        if record.kind == POST:
            try:
                if forward(record.message):
                    forwarded.add(record.message.id)
            except BrokerError as exc:
                logger.warning("outbox post {} stays pending: {}", record.message.id, exc)
                continue
            except MailboxNotFoundError:
                pass  # the dispatch marks it Failed, as for a local mailbox gone
        kept.append(record)
    return frozenset(forwarded), tuple(kept)


class _DispatcherActor(pykka.ThreadingActor):
    use_daemon_thread = True  # never holds an interpreter exit up: see orkeon_actors.actors.exit

    def __init__(self, host: OutboxHost) -> None:
        super().__init__()
        self._host = host

    def on_receive(self, message: object) -> object:
        if isinstance(message, _Dispatch):
            self._dispatch(message.records)
        return None

    def _dispatch(self, records: tuple[OutboxRecord, ...]) -> None:
        host = self._host
        faults.hit("outbox.before_dispatch")
        routed = False
        for record in records:
            if record.kind == PUBLISH:
                try:
                    host.route_live(record.message)
                except Exception:  # a subscriber's failure must not stop the dispatch
                    logger.opt(exception=True).error("routing outbox message {} failed", record.message.id)
                routed = True
        if routed:
            faults.hit("outbox.after_route")
        forwarded, records = _forward_remote_posts(host, records)
        try:
            host.writer.post(
                _dispatch_work(host, records, forwarded),
                after_commit=lambda outcome: _settle_dispatch(host, outcome),
                on_error=lambda error: logger.opt(exception=error).error(
                    "dispatching {} outbox message(s) failed; they stay pending and are dispatched "
                    "again at the next boot",
                    len(records),
                ),
            )
        except Exception:
            logger.opt(exception=True).warning(
                "the store closed before {} outbox message(s) were marked dispatched; "
                "they are dispatched again at the next boot",
                len(records),
            )


class OutboxDispatcher:
    """Delivers committed outbox rows; see the module docstring. Thread-safe."""

    def __init__(self, host: OutboxHost) -> None:
        self._ref = _DispatcherActor.start(host)

    def dispatch(self, records: Sequence[OutboxRecord]) -> None:
        """Deliver ``records`` (committed, pending) in order, asynchronously."""
        if records:
            self._ref.tell(_Dispatch(tuple(records)))

    def stop(self) -> None:
        """Hand every queued dispatch to the writer, then stop; idempotent."""
        try:
            self._ref.stop()
        except pykka.ActorDeadError:
            return
