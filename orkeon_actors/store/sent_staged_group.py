"""The write groups of staged sends (:mod:`orkeon_actors.store.sent_staged`): the intents
and the completions of many concurrent posts to other hosts, each kind written by one
call per writer batch instead of one request's statements each.

Many threads posting at once to mailboxes on other hosts queue an intent and, once the
broker confirmed, a completion each; the writer drains them in batches (group commit).
Like :mod:`orkeon_actors.store.sent_group` for local sends, everything that does not
depend on the store is prepared on the caller's thread (the intent's and the record's
canonical bytes, the record's SHA-256, the content digest), so the writer only inserts:

* :class:`IntentGroup`: the unkeyed intents of a batch in multi-row ``INSERT``
  statements (a keyed intent checks its key first: it takes the single-request path);
* :class:`CompletionGroup`: each sender's head read once per batch, its rows chained in
  queue order, then the rows, nodes and heads with one prepared statement each and the
  intents deleted by multi-row statements. A completion queued here is the first of its
  intent (the send that reserved it, in this process), so it does not look for a row
  written already; a completion retried or resumed after a failure or a crash still does
  (:func:`orkeon_actors.store.sent_staged.StagedSends` keeps that path).

The crash points of a send are reached once per completion, in order, for the whole
batch. If a group call raises (a damaged head), the writer applies each item alone, so
only the culprit fails.
"""

from __future__ import annotations

from typing import Any

import apsw
import attrs

from orkeon_actors.history.records import SentIntent
from orkeon_actors.store import faults, sent_rows
from orkeon_actors.store.sent_rows import LedgerEntry
from orkeon_actors.store.writer import WriteGroup
from orkeon_actors.wire.sent_history import intent_bytes

__all__ = ["CompletionGroup", "IntentGroup", "PreparedIntent"]

_ROWS_PER_STATEMENT = 100
_INTENT_COLUMNS = "(message_id, sender, recipient, idempotency_key, content, intent, created_ms)"


def _insert_intents_sql(rows: int) -> str:
    return f"INSERT INTO sent_intents {_INTENT_COLUMNS} VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)


def _delete_intents_sql(rows: int) -> str:
    return "DELETE FROM sent_intents WHERE message_id IN (" + ", ".join("?" * rows) + ")"


@attrs.frozen
class PreparedIntent:
    """The ``sent_intents`` row of an unkeyed staged send, prepared off the writer."""

    params: tuple[Any, ...]

    @classmethod
    def of(cls, intent: SentIntent, content: bytes) -> PreparedIntent:
        if intent.idempotency_key is not None:
            raise ValueError("a keyed intent checks its key first: reserve it alone")
        return cls(
            (
                intent.message_id,
                intent.sender.id,
                intent.to.key,
                None,
                content,
                intent_bytes(intent),
                intent.created_ms,
            )
        )


class IntentGroup(WriteGroup[PreparedIntent, None]):
    """Unkeyed intents, many per statement (a message id is new: nothing can clash)."""

    def apply(self, conn: apsw.Connection, items: list[PreparedIntent]) -> list[BaseException | None]:
        for start in range(0, len(items), _ROWS_PER_STATEMENT):
            chunk = items[start : start + _ROWS_PER_STATEMENT]
            conn.execute(_insert_intents_sql(len(chunk)), [value for item in chunk for value in item.params])
        return [None] * len(items)

    def atomic(self, items: list[PreparedIntent]) -> bool:
        return len(items) <= _ROWS_PER_STATEMENT


class CompletionGroup(WriteGroup[LedgerEntry, None]):
    """First completions of staged sends (see the module docstring). Raises
    ``StoreCorruptError`` for a damaged head or one of another version: the writer then
    completes each alone, and only the culprit fails."""

    def apply(self, conn: apsw.Connection, items: list[LedgerEntry]) -> list[BaseException | None]:
        sent_rows.append_batch(conn, items)
        for start in range(0, len(items), _ROWS_PER_STATEMENT):
            chunk = items[start : start + _ROWS_PER_STATEMENT]
            conn.execute(_delete_intents_sql(len(chunk)), [item.intent.message_id for item in chunk])
        for _ in items:
            faults.hit("send.intent_cleaned")
        return [None] * len(items)
