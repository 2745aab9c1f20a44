"""The staged sends of a fleet host: posts and requests to mailboxes on other hosts, and
replies, whose recipient copy is made outside this store's transaction (sender-owned
history requirements, MESSAGE-R05, R06; the protocol of
:mod:`orkeon_actors.history.intents` with the broker as the materialiser).

One send, on the caller's thread:

1. **reserve** the intent with the message's original bytes: one writer request,
   group-committed with whatever else is queued, waited for (the intent must be durable
   before the message can leave the process); the unkeyed intents of one batch are
   inserted together (:class:`~orkeon_actors.store.sent_staged_group.IntentGroup`);
2. **materialise**: the core's ``terminal`` delivery (for a post, publish and wait for
   the broker's confirm);
3. **complete**: queued on the writer and *not* waited for. The call returns once the
   recipient copy is made; the row commits with the writer's next group commit, so a
   send costs one commit wait instead of two. A reader of this process sees the row:
   :meth:`StagedSends.settle` waits for the completions in flight before each read. A
   completion that fails (the disk is full) is retried at the sender's next operation
   with the same bytes; a crash before it committed leaves the intent pending, resumed
   at the next boot. The completions of one batch are written together
   (:class:`~orkeon_actors.store.sent_staged_group.CompletionGroup`, its rows and
   bytes prepared on the sender's thread).

**Resumption** (R06): at boot, the fleet hub hands :meth:`StagedSends.resume` its
``republish``: each pending intent of a post to another host (not a unit of work's, which
its outbox row resumes; not a reply's, abandoned at boot) is published again with its
original message (same id, same bytes: the receiving gateway drops a message id it
already received), and completed once the broker confirmed it. One that cannot be
published now (its mailbox is bound nowhere, no confirm in time) stays pending, with a
WARNING, and is tried again before its sender's next send. Never a second row: a
completion of an intent whose row exists only drops the intent.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future

import apsw
from loguru import logger

from orkeon_actors.errors import StoreError
from orkeon_actors.history.records import SendKind, SentIntent
from orkeon_actors.model.message import Message
from orkeon_actors.store import faults, sent_rows
from orkeon_actors.store.sent_staged_group import CompletionGroup, IntentGroup, PreparedIntent
from orkeon_actors.store.writer import StoreWriter
from orkeon_actors.wire.sent_history import (
    SentRecordError,
    content_digest,
    intent_bytes,
    intent_from_bytes,
    record_of,
)

__all__ = ["Republish", "StagedSends"]

Republish = Callable[[Message], "Future[None]"]
"""Publish a resumed post again (its original message); the future completes on the
broker's confirm or fails with why it could not be published."""

Reserve = Callable[[SentIntent, bytes], "Message | None"]


def _complete(conn: apsw.Connection, intent: SentIntent, content: bytes, now_ms: int) -> None:
    """Complete ``intent`` unless its row exists already (then the intent is cleanup)."""
    if sent_rows.is_completed(conn, intent.sender.id, intent.message_id):
        conn.execute("DELETE FROM sent_intents WHERE message_id = ?", (intent.message_id,))
        return
    sent_rows.complete(conn, record_of(intent), content, now_ms)


class StagedSends:
    """The staged sends of one store's sent history (see the module docstring).
    ``reserve(intent, content)`` commits an intent (or returns the original message of a
    reused idempotency key); ``now_ms()`` stamps completions."""

    def __init__(self, writer: StoreWriter, reserve: Reserve, now_ms: Callable[[], int]) -> None:
        self._writer = writer
        self._reserve = reserve
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._in_flight = 0
        self._failed: dict[str, dict[str, tuple[SentIntent, bytes]]] = {}
        """Per sender: completions that failed, retried at its next operation."""
        self._unresumed: dict[str, list[SentIntent]] = {}
        """Per sender: pending intents left by the last run that could not be published
        again at boot, tried again at its next operation."""
        self.republish: Republish | None = None
        """Set by the fleet hub once its broker link is up."""
        self._intents = IntentGroup()
        self._completions = CompletionGroup()
        self._requests: list[SentIntent] = []
        """Pending intents of requests found by :meth:`pending_posts`, abandoned by
        :meth:`resume`."""

    # -- one send -----------------------------------------------------------------------

    def send(self, intent: SentIntent, terminal: Callable[[Message], Message]) -> Message:
        """Reserve, materialise through ``terminal``, queue the completion; returns what
        ``terminal`` returned (or the original message of a reused key, delivering
        nothing). If ``terminal`` raises, nothing was sent: the intent is dropped and the
        error raised. The caller ran :meth:`before_operation` for the sender first."""
        content = content_digest(intent.kind, intent.to, intent.message)
        if intent.idempotency_key is None:  # nothing to look up: one multi-row insert per batch
            self._writer.execute_in(self._intents, PreparedIntent.of(intent, content))
        else:
            replayed = self._reserve(intent, content)
            if replayed is not None:
                return replayed
        faults.hit("send.intent_reserved")
        message_id = intent.message_id
        try:
            delivered = terminal(intent.message)
        except BaseException:
            self._writer.execute(
                lambda conn: conn.execute("DELETE FROM sent_intents WHERE message_id = ?", (message_id,)),
                single_statement=True,
            )
            raise
        faults.hit("send.recipient_materialised")
        self._complete_nowait(intent, content)
        return delivered

    def _complete_nowait(self, intent: SentIntent, content: bytes) -> None:
        with self._lock:
            self._in_flight += 1

        def done(_: None) -> None:
            with self._lock:
                self._in_flight -= 1

        def failed(error: BaseException) -> None:
            logger.error(
                "the sent row of {} by {} did not commit ({}); it stays pending and is retried at the "
                "sender's next operation",
                intent.message_id,
                intent.sender.address,
                error,
            )
            with self._lock:
                self._in_flight -= 1
                self._failed.setdefault(intent.sender.id, {})[intent.message_id] = (intent, content)

        prepared = sent_rows.LedgerEntry.of(intent, content, self._now_ms())
        self._writer.post_in(self._completions, prepared, after_commit=done, on_error=failed)

    def _completion(self, intent: SentIntent, content: bytes) -> Callable[[apsw.Connection], None]:
        return functools.partial(_complete, intent=intent, content=content, now_ms=self._now_ms())

    def settle(self) -> None:
        """Wait until every completion queued so far committed (or failed): called before
        a read of the history, so that a sender reads its own sends."""
        with self._lock:
            if not self._in_flight:
                return
        self._writer.execute(lambda _conn: None, single_statement=True)  # the writer commits in order

    # -- the sender's next operation -------------------------------------------------------

    def before_operation(self, sender: str) -> None:
        """Finish what ``sender`` left unfinished: failed completions, then intents of the
        last run not resumed at boot (each one still failing stays pending)."""
        with self._lock:
            failed = self._failed.pop(sender, {})
            unresumed = self._unresumed.pop(sender, [])
        for intent, content in failed.values():
            try:
                self._writer.execute(self._completion(intent, content))
            except StoreError:
                with self._lock:
                    self._failed.setdefault(sender, {})[intent.message_id] = (intent, content)
                raise
        if unresumed:
            self._resume_intents(unresumed)

    # -- boot ---------------------------------------------------------------------------

    def pending_posts(self, conn: apsw.Connection) -> list[SentIntent]:
        """At boot, read on ``conn``: the pending intents of posts to another host the
        last run left (not a unit of work's: its outbox row resumes it; not a reply's,
        abandoned by the history's boot; not a request's: its requester died with that
        process, so :meth:`resume` moves it to ``sent_abandoned``), oldest first."""
        intents: list[SentIntent] = []
        abandoned: list[SentIntent] = []
        for message_id, raw in list(sent_rows.pending_intents(conn)):
            try:
                intent = intent_from_bytes(raw)
            except SentRecordError:
                continue  # logged by the history's own boot, which leaves it pending
            if intent.kind is SendKind.SEND:
                abandoned.append(intent)
                continue
            if intent.kind is not SendKind.POST:
                continue
            if conn.execute("SELECT 1 FROM outbox WHERE message_id = ?", (message_id,)).fetchone() is None:
                intents.append(intent)
        self._requests = abandoned
        return intents

    def resume(self, intents: list[SentIntent], republish: Republish) -> int:
        """At boot: publish ``intents`` (:meth:`pending_posts`) again and complete each
        confirmed one (see the module docstring); ``republish`` is kept for the senders'
        next operations. Returns how many completed."""
        self.republish = republish
        requests, self._requests = self._requests, []
        for request in requests:  # its requester died with the last run: never confirmed
            self._writer.execute(
                functools.partial(
                    sent_rows.abandon,
                    intent=request,
                    raw=intent_bytes(request),
                    now_ms=self._now_ms(),
                    reason="the process died between the request's intent and its completion",
                )
            )
            logger.warning(
                "request {} of {} was interrupted by a crash; its requester died with that process, "
                "so it is kept in sent_abandoned, not as a sent row",
                request.message_id,
                request.sender.address,
            )
        if not intents:
            return 0
        logger.info("resuming {} pending sent-history intent(s) left by the last run", len(intents))
        return self._resume_intents(intents)

    def _resume_intents(self, intents: list[SentIntent], timeout: float = 10.0) -> int:
        """Publish each intent's message again (all at once), complete each confirmed
        one; the others stay pending for their sender's next operation."""
        republish = self.republish
        if republish is None:
            raise StoreError("no broker link to resume sent-history intents on (the fleet hub is not started)")
        published: list[tuple[SentIntent, Future[None]]] = []
        for intent in intents:
            try:
                published.append((intent, republish(intent.message)))
            except Exception as exc:  # refused before publishing: keep it for later
                failed: Future[None] = Future()
                failed.set_exception(exc)
                published.append((intent, failed))
        done = 0
        for intent, future in published:
            try:
                future.result(timeout)
            except Exception as exc:  # FutureTimeout included
                logger.warning(
                    "sent-history intent {} of {} to {} could not be published again ({}); it stays "
                    "pending (coverage partial) and is tried again at the sender's next send",
                    intent.message_id,
                    intent.sender.address,
                    intent.to.address,
                    exc,
                )
                with self._lock:
                    self._unresumed.setdefault(intent.sender.id, []).append(intent)
                continue
            content = content_digest(intent.kind, intent.to, intent.message)
            self._writer.execute(self._completion(intent, content))
            done += 1
        return done
