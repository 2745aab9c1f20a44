"""The write group of agents' posts and sends: the recipient copy, the sender's row,
its ledger node and the replaced head of many sends, in one writer transaction
(sender-owned history requirements, MESSAGE-R05, R07, R08).

The caller's thread prepares everything that does not depend on the store (the
mailbox row, the record's canonical bytes and their SHA-256, the content digest), so
the writer only checks keys and the registry, links each node to its sender's head and
inserts: one multi-row statement for the mailbox rows, one prepared statement each for
rows, nodes and heads, each head read once per batch and written once per batch.
Every send still does constant history-dependent work; a sender's sends in one batch
chain in their queue order. The crash points of a send are reached once per send, in
order, for the whole batch.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import apsw
import attrs

from orkeon_actors.errors import IdempotencyKeyConflictError, MailboxNotFoundError
from orkeon_actors.history.records import SendKind, SentIntent, SentRecord
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.store import faults, mailboxes, sent_rows
from orkeon_actors.store.writer import WriteGroup
from orkeon_actors.wire.sent_history import content_digest

__all__ = ["PreparedSend", "SentGroup", "original_message"]


@attrs.frozen
class PreparedSend:
    """One post or send, prepared off the writer's thread."""

    intent: SentIntent
    to: MailboxAddress
    address: str
    params: tuple[Any, ...]
    entry: sent_rows.LedgerEntry

    @property
    def content(self) -> bytes:
        return self.entry.content

    @classmethod
    def of(cls, intent: SentIntent, to: MailboxAddress) -> PreparedSend:
        address = str(to)
        # Only a keyed retry compares contents: an unkeyed row keeps an empty digest.
        content = b"" if intent.idempotency_key is None else content_digest(intent.kind, intent.to, intent.message)
        return cls(
            intent,
            to,
            address,
            mailboxes.insert_params(address, intent.message),
            sent_rows.LedgerEntry.of(intent, content, intent.created_ms),
        )


class SentGroup(WriteGroup[PreparedSend, Message | None]):
    """Each item's outcome: ``None`` (sent and recorded), the original message (its key
    was used with the same content: nothing written), or the error failing it alone
    (``IdempotencyKeyConflictError``, ``MailboxNotFoundError``, ``StoreCorruptError``
    for a damaged head)."""

    def __init__(self, registry: mailboxes.RegistryCache, next_seq: Any, epoch: int) -> None:
        self._registry = registry
        self._next_seq = next_seq
        self._epoch = epoch
        """The start of the running index, which every node of this run chains (the
        index starts at the store's boot, before the first send, and not again)."""

    def apply(self, conn: apsw.Connection, items: list[PreparedSend]) -> list[Message | BaseException | None]:
        outcomes: list[Message | BaseException | None] = []
        accepted: list[PreparedSend] = []
        in_batch: dict[tuple[str, str, str], PreparedSend] = {}
        for item in items:
            outcome = self._admit(conn, item, in_batch)
            outcomes.append(outcome)
            if outcome is None:
                accepted.append(item)
            faults.hit("send.intent_reserved")
        if not accepted:
            return outcomes
        mailbox_rows = []
        for item in accepted:
            mailbox_rows.append((*item.params, self._next_seq(), item.params[4]))
        mailboxes.insert_rows(conn, mailbox_rows)
        for _ in accepted:
            faults.hit("send.recipient_materialised")
        sent_rows.append_batch(conn, [item.entry for item in accepted], self._epoch)
        for _ in accepted:
            faults.hit("send.intent_cleaned")  # no intent row: it would die in this same transaction
        return outcomes

    def _admit(
        self, conn: apsw.Connection, item: PreparedSend, in_batch: dict[tuple[str, str, str], PreparedSend]
    ) -> Message | BaseException | None:
        intent = item.intent
        key = intent.idempotency_key
        if key is not None:
            scope = (intent.sender.id, intent.to.key, key)
            earlier = in_batch.get(scope)
            if earlier is not None:
                return _replay(intent, key, earlier.content, item.content, earlier.intent.message)
            found = sent_rows.find_key(conn, intent.sender, intent.to, key)
            if found is not None:
                _, original_content, record = found
                return _replay(intent, key, original_content, item.content, original_message(record))
            in_batch[scope] = item
        if not self._registry.contains(conn, item.address):
            if key is not None:
                in_batch.pop((intent.sender.id, intent.to.key, key), None)
            return MailboxNotFoundError(item.to)
        return None


def _replay(
    intent: SentIntent, key: str, original_content: bytes, content: bytes, original: Message
) -> Message | BaseException:
    if original_content != content:
        return IdempotencyKeyConflictError(
            f"idempotency_key {key!r} of {intent.sender.address} to {intent.to.address} was used for "
            f"message {original.id} with other content; use a new key for new content",
            key=key,
            original_id=str(original.id),
        )
    return original


def original_message(found: SentRecord | SentIntent) -> Message:
    """The message a reused key returns: the intent's own, or rebuilt from the row (its
    time at millisecond precision)."""
    if isinstance(found, SentIntent):
        return found.message
    crew, _, agent = found.sender.id.partition("/")
    target = None if found.kind is SendKind.REPLY else MailboxAddress.parse(found.to.address)
    return Message(
        MessageId(found.message_id),
        found.topic,
        CrewId(crew),
        datetime.fromtimestamp(found.sent_at_ms / 1000, tz=UTC),
        found.body or b"",
        found.metadata or {},
        AgentId(agent),
        None if target is None else target.target_crew_id,
        target,
        None if found.correlation_id is None else CorrelationId(found.correlation_id),
        found.schema_id,
    )
