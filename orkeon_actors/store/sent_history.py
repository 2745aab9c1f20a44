"""``SqliteSentHistory``: the embedded store's sender-owned sent history, the hub core's
:class:`~orkeon_actors.hub.collaborators.SentRecorder` (sender-owned history requirements,
MESSAGE-R01..R08, R11).

Which sends are recorded: every post, send (request) and reply to a mailbox, and every
post to a ``topic://`` address, by a caller bound to an agent (``hub.bind(crew,
agent)``). Never: ``hub.system`` and crew-level callers (no agent: a service principal,
R11), anything whose other end is the system crew or a reserved ``_system.`` topic,
``publish`` (an event the hub emits on a topic, not a message an agent addressed to
someone), timeouts. Each endpoint carries the crew's readable name at that instant
(:meth:`~orkeon_actors.hub.port.EventHub.crew_name`), display only.

The protocol of one send, with its crash points (:data:`~orkeon_actors.store.faults.SEND_POINTS`):

1. **reserve** the intent (``send.intent_reserved``): check the scoped idempotency key;
2. **materialise** the recipient copy, idempotently (``send.recipient_materialised``);
3. **complete**: the row (``send.row_written``), its ledger node
   (``send.node_written``), the replaced head (``send.head_replaced``), the intent
   dropped (``send.intent_cleaned``).

* A **post or send** runs the three steps in one writer transaction (group-committed
  with other work): the recipient's ``mailboxes`` row, the sender's row, node and head
  commit together or not at all, so a crash at any point leaves no trace of that send
  and a completed row always has its recipient copy. The intent needs no row of its own
  then (it would be written and deleted in the same transaction).
* A **reply**'s recipient copy is the requester's live waiter, and a **topic post**'s
  its live subscribers, both outside the store, so the steps commit apart: the intent
  commits first (with the original bytes), then the reply is answered (the post
  routed), then the completion commits. After a crash between the two commits the
  requester (the subscribers) died with the process, so the send can never be
  confirmed: the next boot moves the intent to ``sent_abandoned`` (kept for audit,
  never a row), and until then the coverage is ``partial``. In the process, a
  completion that failed (the disk was full) is retried at the sender's next operation
  with the same bytes.
* A **unit of work**'s posts by an agent (to a mailbox or a topic) reserve their
  intents in the unit of work's transaction; the outbox dispatch materialises the copy
  (routes the topic post) and completes the row in one transaction (resumed at boot
  with the outbox row's original bytes).

The distributed hub keeps the same three steps with the broker between them: see
:mod:`orkeon_actors.history.intents`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import apsw
from loguru import logger

from orkeon_actors.errors import IdempotencyKeyConflictError, SentHistoryUnavailableError
from orkeon_actors.history.endpoint import Endpoint, EndpointKind, agent_endpoint, endpoint_of
from orkeon_actors.history.ledger import LedgerReport
from orkeon_actors.history.records import SendKind, SentIntent
from orkeon_actors.history.view import Coverage, SentHistory
from orkeon_actors.hub.port import POST_TOPIC, REPLY_TOPIC
from orkeon_actors.model.address import MailboxAddress, Scheme, is_reserved_topic
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.store import faults, sent_rows
from orkeon_actors.store.sent_group import PreparedSend, SentGroup, original_message
from orkeon_actors.store.sent_reads import read_history, verify_history
from orkeon_actors.store.sent_staged import StagedSends
from orkeon_actors.wire.sent_history import (
    SentRecordError,
    content_digest,
    intent_from_bytes,
    record_of,
)

if TYPE_CHECKING:
    from orkeon_actors.store.durable_hub import SqliteEventHub

__all__ = ["SqliteSentHistory", "is_recorded"]


def is_recorded(message: Message, to: MailboxAddress | None) -> bool:
    """Whether ``message`` to ``to`` belongs in its sender's history (see the module
    docstring)."""
    if message.source_agent_id is None or message.source_crew_id.is_system or to is None:
        return False
    if to.scheme is Scheme.TOPIC:
        return not is_reserved_topic(to.name or "")
    return not (to.crew_id is not None and to.crew_id.is_system)


_agent_endpoint = functools.lru_cache(maxsize=4096)(agent_endpoint)
"""Endpoints are immutable values of their arguments: built once per sender (and name)."""
_endpoint_of = functools.lru_cache(maxsize=4096)(endpoint_of)


def _kind(message: Message, to: MailboxAddress) -> SendKind:
    if to.scheme is Scheme.TOPIC:
        return SendKind.POST  # a topic post's message topic is the topic itself
    if message.topic == REPLY_TOPIC:
        return SendKind.REPLY
    return SendKind.POST if message.topic == POST_TOPIC else SendKind.SEND


def _in_outbox(conn: apsw.Connection, message_id: str) -> bool:
    """Whether a unit of work's outbox still holds ``message_id`` to dispatch (it then
    resumes the send with the row's original bytes)."""
    found = conn.execute("SELECT 1 FROM outbox WHERE message_id = ? AND state = 'Pending'", (message_id,))
    return found.fetchone() is not None


class SqliteSentHistory:
    """The sent history of one :class:`~orkeon_actors.store.SqliteEventHub` (see the
    module docstring). ``enabled`` is the store's ``sent_history`` setting."""

    def __init__(self, hub: SqliteEventHub, enabled: bool) -> None:
        self.hub = hub
        self.enabled = enabled
        self._lock = threading.Lock()
        self.epoch = 0
        """The start of the index this run keeps (``0``: off), set by :meth:`open`: the
        epoch the ledger nodes written by this run chain."""
        self._materialised: dict[str, dict[str, tuple[SentIntent, bytes]]] = {}
        """Per sender: replies answered whose completion did not commit (retried at the
        sender's next operation)."""

    def now_ms(self) -> int:
        return int(self.hub.clock.now().timestamp() * 1000)

    # -- boot --------------------------------------------------------------------------

    def open(self, conn: apsw.Connection) -> None:
        """At boot, on the migrated store: start (or stop) the index, then resolve the
        intents the last run left: a reply's is abandoned (its requester died with that
        process); a unit of work's post is left to the outbox, which resumes it."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not self.enabled:
                sent_rows.drop_index(conn, self.now_ms())
            else:
                self.epoch = sent_rows.ensure_index(conn, self.now_ms())
                self._resolve_at_boot(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _resolve_at_boot(self, conn: apsw.Connection) -> None:
        now = self.now_ms()
        for message_id, raw in list(sent_rows.pending_intents(conn)):
            try:
                intent = intent_from_bytes(raw)
            except SentRecordError as exc:
                logger.error("sent intent {} is unreadable and stays pending (verify reports it): {}", message_id, exc)
                continue
            if sent_rows.is_completed(conn, intent.sender.id, message_id):
                conn.execute("DELETE FROM sent_intents WHERE message_id = ?", (message_id,))  # cleanup state
            elif intent.kind is SendKind.REPLY:
                sent_rows.abandon(
                    conn, intent, raw, now, "the process died between the reply's intent and its completion"
                )
                logger.warning(
                    "reply {} of {} was interrupted by a crash; its requester died with that process, "
                    "so it is kept in sent_abandoned, not as a sent row",
                    message_id,
                    intent.sender.address,
                )
            elif intent.to.kind is EndpointKind.TOPIC and not _in_outbox(conn, message_id):
                sent_rows.abandon(
                    conn, intent, raw, now, "the process died between the topic post's intent and its completion"
                )
                logger.warning(
                    "topic post {} of {} was interrupted by a crash; its live subscribers died with that "
                    "process, so it is kept in sent_abandoned, not as a sent row",
                    message_id,
                    intent.sender.address,
                )

    # -- the hub core's SentRecorder -----------------------------------------------------

    def deliver(
        self, message: Message, to: MailboxAddress | None, key: str | None, terminal: Callable[[Message], Message]
    ) -> Message:
        """Deliver ``message`` (a post, send or reply) and record it in its sender's
        history, or, for a reused ``key`` with the same content, return the original
        message without delivering anything. ``terminal`` is the core's live delivery
        (a reply's answer; a post's store append, which this replaces by its own
        transaction). Raises ``IdempotencyKeyConflictError`` for a reused key with other
        content, ``MailboxNotFoundError`` for a mailbox no longer registered."""
        if not self.enabled or not is_recorded(message, to):
            if key is not None:
                raise SentHistoryUnavailableError(
                    "idempotency_key needs the sent history of an agent: bind the client to an agent "
                    "(hub.bind(crew, agent)) on a store opened with sent_history=True, and send to a mailbox"
                )
            return terminal(message)
        assert to is not None
        sender = self._sender(message)
        if self._materialised.get(sender.id):
            self._retry_completions(sender.id)
        if "staged" in self.__dict__:
            self.staged.before_operation(sender.id)
        kind = _kind(message, to)
        elsewhere = kind is not SendKind.REPLY and to.scheme is not Scheme.TOPIC and self._lives_elsewhere(to)
        intent = SentIntent(kind, sender, self._endpoint(to, elsewhere=elsewhere), key, message, self.now_ms())
        if kind is SendKind.REPLY or to.scheme is Scheme.TOPIC or elsewhere:
            if self.hub.forward_post is not None and to.scheme is not Scheme.TOPIC:  # a fleet host (sent_staged)
                return self.staged.send(intent, terminal)
            return self._staged(intent, content_digest(kind, intent.to, message), terminal)
        return self._one_transaction(intent, to)

    def replay_reply(self, message: Message, key: str) -> Message | None:
        """The reply ``message``'s sender made under ``key`` to its correlation id (the
        request was answered, so it is not pending any more), or ``None``; raises
        ``IdempotencyKeyConflictError`` when that reply had other content."""
        if not self.enabled or message.source_agent_id is None or message.correlation_id is None:
            return None
        sender = self._sender(message)
        self._settle()
        with self.hub.readers.connection() as conn:
            found = sent_rows.find_reply(conn, sender.id, key, str(message.correlation_id))
        if found is None:
            return None
        original_content, original = found
        to = original.to
        first = original_message(original)
        if content_digest(SendKind.REPLY, to, message) != original_content:
            raise IdempotencyKeyConflictError(
                f"idempotency_key {key!r} of {sender.address} was used for reply {first.id} to "
                f"request {message.correlation_id} with other content; the request was answered already",
                key=key,
                original_id=str(first.id),
            )
        return first

    def _sender(self, message: Message) -> Endpoint:
        """The agent endpoint of ``message``'s sender, with its crew's name now."""
        assert message.source_agent_id is not None
        crew = message.source_crew_id
        return _agent_endpoint(crew, message.source_agent_id, self.hub.crew_name(crew))

    def _endpoint(self, to: MailboxAddress, *, elsewhere: bool = False) -> Endpoint:
        """The canonical endpoint of ``to``, with its crew's name now (display only): the
        name a live crew told the hub, else the ``name`` of the crew's last snapshot in
        this store (a sleeping crew, or one asleep since before a restart), else none (a
        crew this store never held, such as one on another host). ``elsewhere``: ``to``
        is a mailbox of another host (:meth:`_lives_elsewhere`), whose crew is not asleep
        here (a sleeping crew's mailboxes stay registered in its store): no snapshot is
        read for it. Nor for a mailbox live in this runtime: its crew is not asleep (a
        live crew that told no name has none), and the post pays no reader query."""
        name = self.hub.crew_name(to.crew_id)
        if (
            name is None
            and not elsewhere
            and to.crew_id is not None
            and to.scheme in (Scheme.AGENT, Scheme.CREW)
            and to not in self.hub.mailbox_store.live  # a live mailbox's crew is not asleep
        ):
            name = self._stored_crew_name(to.crew_id)
        return _endpoint_of(to, name)

    def _stored_crew_name(self, crew_id: CrewId) -> str | None:
        """The ``name`` field of ``crew_id``'s last committed snapshot, read through a
        reader (one primary-key lookup; it never waits on the writer)."""
        rows = self.hub.readers.query(
            "SELECT json_extract(CAST(snapshot AS TEXT), '$.name') FROM crew_snapshots WHERE crew_id = ?",
            (str(crew_id),),
        )
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    def _lives_elsewhere(self, to: MailboxAddress) -> bool:
        """On a fleet host (a hub that forwards posts to other hosts), a mailbox this
        store does not hold: its copy is materialised by the broker's confirm (the
        ``terminal`` delivery), so the send takes the staged intent protocol."""
        return self.hub.forward_post is not None and not self.hub.mailbox_store.exists(to)

    def _check_key(self, conn: apsw.Connection, intent: SentIntent, content: bytes) -> Message | None:
        key = intent.idempotency_key
        if key is None:
            return None
        found = sent_rows.find_key(conn, intent.sender, intent.to, key)
        if found is None:
            return None
        original_id, original_content, record = found
        if original_content != content:
            raise IdempotencyKeyConflictError(
                f"idempotency_key {key!r} of {intent.sender.address} to {intent.to.address} was used for "
                f"message {original_id} with other content; use a new key for new content",
                key=key,
                original_id=original_id,
            )
        return original_message(record)

    @functools.cached_property
    def staged(self) -> StagedSends:
        """The staged sends of a fleet host (:mod:`orkeon_actors.store.sent_staged`)."""
        return StagedSends(self.hub.writer, self._reserve_intent, self.now_ms)

    def _reserve_intent(self, intent: SentIntent, content: bytes) -> Message | None:
        """Commit ``intent`` (one writer request); the original message of a reused key."""

        def work(conn: apsw.Connection) -> Message | None:
            original = self._check_key(conn, intent, content)
            if original is None:
                sent_rows.reserve(conn, intent, content)
            return original

        return self.hub.writer.execute(work, single_statement=intent.idempotency_key is None)

    @functools.cached_property
    def group(self) -> SentGroup:
        """The write group of posts and sends (created at the first send, once the store
        is open and its index epoch known)."""
        return SentGroup(self.hub.mailbox_store.registry, self.hub.next_seq, self.epoch)

    def _one_transaction(self, intent: SentIntent, to: MailboxAddress) -> Message:
        store = self.hub.mailbox_store
        future = store.take_pipelined()
        if future is not None:
            self._one_transaction_nowait(intent, to, future)
            return intent.message
        live: list[Any] = [None]

        def capture(replayed: Message | None) -> None:
            if replayed is None:
                live[0] = store.live.get(to)

        replayed = self.hub.writer.execute_in(
            self.group, PreparedSend.of(intent, to), after_commit=capture, **self._lane(intent, to)
        )
        if replayed is not None:
            return replayed
        store.hand_to_live(intent.message, live[0])
        return intent.message

    def _one_transaction_nowait(self, intent: SentIntent, to: MailboxAddress, future: Future[Message]) -> None:
        """:meth:`_one_transaction` for a pipelined post (``post_nowait``): queued for the
        writer's next group commit; ``future`` completes after it, with the message (or
        the original one, for a reused idempotency key), handed to the mailbox live."""
        store = self.hub.mailbox_store

        def committed(replayed: Message | None) -> None:  # on the writer thread, in commit order
            if replayed is not None:
                future.set_result(replayed)
                return
            store.hand_to_live(intent.message, store.live.get(to))  # raising fails the future
            future.set_result(intent.message)

        def failed(error: BaseException) -> None:
            if not future.done():
                future.set_exception(error)

        self.hub.writer.post_in(
            self.group, PreparedSend.of(intent, to), after_commit=committed, on_error=failed, **self._lane(intent, to)
        )

    def _lane(self, intent: SentIntent, to: MailboxAddress) -> dict[str, Any]:
        """The writer's ``key`` and ``urgent`` of a post kept with its sent row: it orders
        against the recipient's mailbox and the sender's sent history, and wakes a
        sleeping recipient urgently (:mod:`orkeon_actors.store.write_queue`)."""
        return {
            "key": (str(to), f"sent {intent.sender.address}"),
            "urgent": self.hub.mailbox_store.wakes_a_crew(to),
        }

    def _staged(self, intent: SentIntent, content: bytes, terminal: Callable[[Message], Message]) -> Message:
        writer = self.hub.writer
        message = intent.message

        def reserve(conn: apsw.Connection) -> Message | None:
            original = self._check_key(conn, intent, content)
            if original is None:
                sent_rows.reserve(conn, intent, content)
            return original

        replayed = writer.execute(reserve)
        if replayed is not None:
            return replayed
        faults.hit("send.intent_reserved")
        try:
            delivered = terminal(message)
        except BaseException:
            # Not delivered (expired meanwhile, refused): nothing was sent, the intent goes.
            writer.execute(lambda conn: conn.execute("DELETE FROM sent_intents WHERE message_id = ?", (message.id,)))
            raise
        faults.hit("send.recipient_materialised")
        pending = self._materialised.setdefault(intent.sender.id, {})
        pending[str(message.id)] = (intent, content)
        writer.execute(lambda conn: sent_rows.complete(conn, record_of(intent), content, self.now_ms()))
        pending.pop(str(message.id), None)
        return delivered

    def _retry_completions(self, sender: str) -> None:
        """The sender's next operation: complete the replies answered whose completion
        did not commit, with their original bytes."""
        pending = self._materialised.get(sender, {})
        for message_id, (intent, content) in list(pending.items()):

            def work(conn: apsw.Connection, intent: SentIntent = intent, content: bytes = content) -> None:
                if not sent_rows.is_completed(conn, intent.sender.id, intent.message_id):
                    sent_rows.complete(conn, record_of(intent), content, self.now_ms())

            self.hub.writer.execute(work)
            pending.pop(message_id, None)

    # -- the IntentLog of hubs whose recipient copy lives elsewhere (history.intents) ----------

    def reserve(self, intent: SentIntent) -> Message | None:
        """Commit ``intent`` (see :class:`~orkeon_actors.history.intents.IntentLog`)."""
        content = content_digest(intent.kind, intent.to, intent.message)

        def work(conn: apsw.Connection) -> Message | None:
            original = self._check_key(conn, intent, content)
            if original is None:
                sent_rows.reserve(conn, intent, content)
            return original

        replayed = self.hub.writer.execute(work)
        if replayed is None:
            faults.hit("send.intent_reserved")
        return replayed

    def complete(self, intent: SentIntent) -> None:
        """Complete a materialised ``intent``; a no-op once completed."""
        content = content_digest(intent.kind, intent.to, intent.message)

        def work(conn: apsw.Connection) -> None:
            if sent_rows.is_completed(conn, intent.sender.id, intent.message_id):
                conn.execute("DELETE FROM sent_intents WHERE message_id = ?", (intent.message_id,))
                return
            sent_rows.complete(conn, record_of(intent), content, self.now_ms())

        self.hub.writer.execute(work)

    def pending(self, sender: Endpoint) -> list[SentIntent]:
        """``sender``'s intents not completed, oldest first (an unreadable one raises
        ``SentRecordError``: it is never skipped)."""
        with self.hub.readers.connection() as conn:
            return [intent_from_bytes(raw) for _, raw in sent_rows.pending_intents(conn, sender.id)]

    # -- units of work and the outbox -------------------------------------------------------

    def reserve_outgoing(self, conn: apsw.Connection, message: Message) -> None:
        """In a unit of work's transaction: reserve the intent of its outgoing post (the
        outbox row carries the same original bytes)."""
        if not self.enabled or not is_recorded(message, message.target_mailbox):
            return
        assert message.target_mailbox is not None
        intent = SentIntent(
            SendKind.POST, self._sender(message), self._endpoint(message.target_mailbox), None, message, self.now_ms()
        )
        sent_rows.reserve(conn, intent, content_digest(SendKind.POST, intent.to, message))

    def complete_outgoing(self, conn: apsw.Connection, message: Message, delivered: bool) -> None:
        """In the outbox dispatch's transaction: the post ``message`` was materialised in
        its mailbox (``delivered``), or failed for good (its intent is abandoned). Done
        even while the history is off, so that no reserved intent stays pending forever
        (the coverage is ``unavailable`` then anyway)."""
        if not is_recorded(message, message.target_mailbox):
            return
        row = conn.execute("SELECT intent, content FROM sent_intents WHERE message_id = ?", (message.id,)).fetchone()
        if row is None:
            return  # reserved before the history was enabled: nothing to complete
        intent = intent_from_bytes(bytes(row[0]))
        if delivered:
            sent_rows.complete(conn, record_of(intent), bytes(row[1]), self.now_ms())
        else:
            sent_rows.abandon(conn, intent, bytes(row[0]), self.now_ms(), "its mailbox was no longer registered")

    # -- reading ----------------------------------------------------------------------------

    def _settle(self) -> None:
        """A fleet host's completions in flight commit before a read (read your sends)."""
        if "staged" in self.__dict__:
            self.staged.settle()

    def read(
        self,
        sender: Endpoint,
        to: Endpoint | None = None,
        since_ms: int | None = None,
        include_body: bool = False,
        after_seq: int | None = None,
    ) -> SentHistory:
        """``sender``'s history (:func:`~orkeon_actors.store.sent_reads.read_history`);
        ``after_seq`` resumes past a ledger position (``SentHistory.seqs``): the cursor
        that never skips a row, where ``since_ms`` may (rows commit in ledger order,
        not in the order their senders' threads stamped them)."""
        self._settle()
        with self.hub.readers.connection() as conn:
            return read_history(conn, sender, to, since_ms, include_body, after_seq)

    def coverage(self, sender: Endpoint) -> Coverage:
        self._settle()
        with self.hub.readers.connection() as conn:
            return sent_rows.coverage(conn, sender.id)

    def verify(self, sender: Endpoint) -> LedgerReport:
        self._settle()
        with self.hub.readers.connection() as conn:
            return verify_history(conn, sender)
