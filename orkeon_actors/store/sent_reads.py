"""Reading a sent history from any connection to a store, the hub's reader or a
read-only one that takes no lock (``orkeon message sent``): one consistent snapshot,
the sender's own rows only, never a mailbox (sender-owned history requirements,
MESSAGE-R03, R09, R10).
"""

from __future__ import annotations

import apsw
import attrs

from orkeon_actors.errors import SentHistoryUnavailableError
from orkeon_actors.history.endpoint import Endpoint
from orkeon_actors.history.ledger import LedgerReport, verify
from orkeon_actors.history.view import CoverageState, SentHistory
from orkeon_actors.store import sent_rows
from orkeon_actors.wire.sent_history import SentRecordError, content_digest, intent_from_bytes

__all__ = ["known_senders", "read_history", "verify_history", "verify_intents"]


def read_history(
    conn: apsw.Connection,
    sender: Endpoint,
    to: Endpoint | None = None,
    since_ms: int | None = None,
    include_body: bool = False,
    after_seq: int | None = None,
) -> SentHistory:
    """``sender``'s history (to ``to``, strictly after ``since_ms``, past the ledger
    position ``after_seq``) and its coverage, read in one snapshot. The rows are exactly
    those the coverage covers: sent strictly after its boundary (the later of
    ``since_ms`` and the index's start), so a count never reaches across a time the
    index was off. An unavailable index returns no rows; a row this release cannot
    decode, or whose columns disagree with its hashed record, raises
    ``StoreCorruptError`` (never skipped: a gap would pass for completeness)."""
    conn.execute("BEGIN")
    try:
        coverage = sent_rows.coverage(conn, sender.id)
        if coverage.state is CoverageState.UNAVAILABLE or coverage.since_ms is None:
            return SentHistory(sender, coverage, (), include_body)
        boundary = coverage.since_ms if since_ms is None else max(since_ms, coverage.since_ms)
        found = sent_rows.read_rows(conn, sender.id, to, boundary, after_seq)
    finally:
        conn.execute("COMMIT")
    rows = [record if include_body else attrs.evolve(record, body=None) for _, record in found]
    return SentHistory(
        sender, attrs.evolve(coverage, since_ms=boundary), tuple(rows), include_body, tuple(seq for seq, _ in found)
    )


def verify_intents(conn: apsw.Connection, sender: Endpoint, report: LedgerReport) -> LedgerReport:
    """Extend a valid ledger report with the sender's pending intents: each must decode
    as an intent of this release's version, name this sender, and agree with the
    columns a keyed retry looks it up by (recipient, key, content digest); the first one
    that does not fails the report (at the position past the head it would take)."""
    if not report.ok:
        return report

    def bad(problem: str) -> LedgerReport:
        return attrs.evolve(report, ok=False, first_bad=report.rows + 1, problem=problem)

    for message_id, recipient, key, content, raw in conn.execute(
        "SELECT message_id, recipient, idempotency_key, content, intent FROM sent_intents"
        " WHERE sender = ? ORDER BY created_ms, message_id",
        (sender.id,),
    ):
        try:
            intent = intent_from_bytes(bytes(raw))
        except SentRecordError as exc:
            return bad(f"intent {message_id}: {exc}")
        if intent.sender.id != sender.id or intent.message_id != message_id:
            return bad(f"intent {message_id} names sender {intent.sender.id} and message {intent.message_id}")
        columns = (("recipient", recipient, intent.to.key), ("idempotency_key", key, intent.idempotency_key))
        for name, column, held in columns:
            if column != held:
                return bad(
                    f"intent {message_id}: its {name} column holds {column!r} but its bytes say {held!r} "
                    "(the column was edited)"
                )
        if content != content_digest(intent.kind, intent.to, intent.message):
            return bad(f"intent {message_id}: its content column is not the digest of its message (edited)")
    return report


def verify_history(conn: apsw.Connection, sender: Endpoint) -> LedgerReport:
    """Walk ``sender``'s ledger to genesis and check its intents, in one snapshot."""
    if not sent_rows.has_tables(conn):
        return LedgerReport(sender.id, False, 0, 0, "this store has no sent history (an older schema)")
    conn.execute("BEGIN")
    try:
        return verify_intents(conn, sender, verify(sent_rows.LedgerTables(conn), sender.id))
    finally:
        conn.execute("COMMIT")


def known_senders(conn: apsw.Connection) -> list[str]:
    """The canonical id of every sender with a head, a node, a row or a pending intent
    in the store, sorted (``SentHistoryUnavailableError`` for a store without the
    history's tables)."""
    if not sent_rows.has_tables(conn):
        raise SentHistoryUnavailableError("this store keeps no sent history (an older schema)")
    found = conn.execute(
        "SELECT sender FROM sent_heads UNION SELECT sender FROM sent_nodes"
        " UNION SELECT sender FROM sent_rows UNION SELECT sender FROM sent_intents ORDER BY 1"
    )
    return [str(row[0]) for row in found]
