"""The staged sends of a fleet host: posts and requests to mailboxes on other hosts, and
replies, whose recipient copy is made outside this store's transaction (sender-owned
history requirements, MESSAGE-R05, R06; the protocol of
:mod:`orkeon_actors.history.intents` with the broker as the materialiser).

One send, on the caller's thread:

1. **reserve** the intent with the message's original bytes: one writer request,
   group-committed with whatever else is queued, waited for (the intent must be durable
   before the message can leave the process);
2. **materialise**: the core's ``terminal`` delivery (for a post, publish and wait for
   the broker's confirm);
3. **complete**: queued on the writer and *not* waited for. The call returns once the
   recipient copy is made; the row commits with the writer's next group commit, so a
   send costs one commit wait instead of two. A reader of this process sees the row:
   :meth:`StagedSends.settle` waits for the completions in flight before each read. A
   completion that fails (the disk is full) is retried at the sender's next operation
   with the same bytes; a crash before it committed leaves the intent pending, resumed
   at the next boot.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import apsw
from loguru import logger

from orkeon_actors.errors import StoreError
from orkeon_actors.history.records import SentIntent
from orkeon_actors.model.message import Message
from orkeon_actors.store import faults, sent_rows
from orkeon_actors.store.writer import StoreWriter
from orkeon_actors.wire.sent_history import content_digest, record_of

__all__ = ["StagedSends"]

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

    # -- one send -----------------------------------------------------------------------

    def send(self, intent: SentIntent, terminal: Callable[[Message], Message]) -> Message:
        """Reserve, materialise through ``terminal``, queue the completion; returns what
        ``terminal`` returned (or the original message of a reused key, delivering
        nothing). If ``terminal`` raises, nothing was sent: the intent is dropped and the
        error raised. The caller ran :meth:`before_operation` for the sender first."""
        content = content_digest(intent.kind, intent.to, intent.message)
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

        self._writer.post(self._completion(intent, content), after_commit=done, on_error=failed)

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
        """Finish the completions of ``sender`` that failed (each one still failing stays
        pending)."""
        with self._lock:
            failed = self._failed.pop(sender, {})
        for intent, content in failed.values():
            try:
                self._writer.execute(self._completion(intent, content))
            except StoreError:
                with self._lock:
                    self._failed.setdefault(sender, {})[intent.message_id] = (intent, content)
                raise
