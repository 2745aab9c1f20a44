"""The durable adapter of the EventHub port on SQLite.

``SqliteEventHub`` is the hub core (:class:`~orkeon_actors.hub.memory.HubCore`: mailbox
actors, topic router, waiters, replies, middleware) configured with durable
collaborators, not a subclass of the in-memory adapter: the mailboxes of
:class:`~orkeon_actors.store.mailbox_store.SqliteMailboxStore`, a dispatch fan-out to its
:attr:`~SqliteEventHub.dispatch_listeners`, and the retained last values written before
a publish returns. Around it:

* **post / send**: the message is inserted into ``mailboxes`` by the writer and the call
  returns only after that transaction committed (group commit). The writer then hands
  it to the live mailbox actor, on its own thread, in commit order, so the live queue
  and the durable rows always agree on order. A mailbox address stays durably
  registered until its registration is closed: posts made while no runtime holds it
  (after a crash, before the restart registers it again) are kept too.
* **register_mailbox** reloads the address's rows, oldest first, before any newer post
  reaches it: FIFO per mailbox across restarts (spec §10.4, §16.2).
* **consume** does not delete at once: a row is deleted when the message is
  *acknowledged* (see :mod:`orkeon_actors.store.acks`). A crash in between redelivers
  it after the restart: at-least-once. For a crew whose state is durable elsewhere
  (lifecycle-managed: :meth:`SqliteEventHub.defer_acks`) the rows it consumes are
  deleted only with its next snapshot, never before. A handler that must process each message exactly
  once consumes it through a :class:`~orkeon_actors.store.unit_of_work.UnitOfWork`,
  whose commit records ``processed_messages``, its effects and the acknowledgement in
  one transaction.
* **retained last values** are written before the publish returns and reloaded at boot.
* **publish** (without retain), **reply** and subscriptions stay live-only: a subscriber
  exists only while its process does.

Boot: lock the file (one runtime per store), migrate the schema, reload the last values,
start the writer, dispatch pending outbox rows, schedule the purge. The mailbox registry
is *not* loaded: it stays in SQLite, checked on demand (a primary-key read) through a
bounded cache, so a store with a million sleeping crews boots in bounded memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import apsw
from loguru import logger

from orkeon_actors.errors import HubStoppedError
from orkeon_actors.history.endpoint import Endpoint, endpoint_of, parse_sender
from orkeon_actors.history.ledger import LedgerReport
from orkeon_actors.history.view import SentHistory
from orkeon_actors.hub.memory import HubCore, LastValueStore, MailboxStore
from orkeon_actors.hub.pipeline import Next, Pipeline
from orkeon_actors.hub.port import (
    CallerContext,
    DispatchObserver,
    DurableEventHub,
    MailboxRegistration,
)
from orkeon_actors.hub.scheduler import Scheduler
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import AgentId, CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.store import faults, last_values, mailboxes
from orkeon_actors.store.acks import ConsumedLedger
from orkeon_actors.store.checkpointer import Checkpointer
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.config import StoreConfig
from orkeon_actors.store.connection import StoreLock, open_connection
from orkeon_actors.store.damage import store_errors
from orkeon_actors.store.identity import verify_store_file
from orkeon_actors.store.mailbox_store import MAILBOX_TOPICS, SqliteMailboxStore
from orkeon_actors.store.open_errors import typed_open_errors
from orkeon_actors.store.outbox import OutboxDispatcher, load_pending
from orkeon_actors.store.purge import Purger, PurgeReport, purgeable_rows_exist
from orkeon_actors.store.reader import ReaderPool
from orkeon_actors.store.records import PendingWaitRecord, SnapshotRecord, pending_wait_from_row, snapshot_from_row
from orkeon_actors.store.schema import migrate
from orkeon_actors.store.sent_history import SqliteSentHistory
from orkeon_actors.store.unit_of_work import UnitOfWork
from orkeon_actors.store.writer import StoreWriter

if TYPE_CHECKING:
    from orkeon_actors.store.records import OutboxRecord

__all__ = ["SqliteEventHub"]


def _identity(message: Message) -> Message:
    return message


class _Dispatch:
    """The hub core's :class:`~orkeon_actors.hub.port.DispatchObserver` of a durable hub:
    the fan-out to its route and dispatch listeners."""

    __slots__ = ("hub",)

    def __init__(self, hub: SqliteEventHub) -> None:
        self.hub = hub

    def routing(self, message: Message) -> None:
        for listener in self.hub.route_listeners:
            listener(message)

    def dispatched(self, message: Message) -> None:
        if self.hub.dispatch_listeners:
            self.hub.notify(message)


class _LastValues:
    """The hub core's :class:`~orkeon_actors.hub.memory.LastValueStore`: written before
    the publish returns (one statement, group-committed)."""

    __slots__ = ("hub",)

    def __init__(self, hub: SqliteEventHub) -> None:
        self.hub = hub

    def retain(self, scope: CrewId | None, key: str, message: Message, remember: Callable[[], None]) -> None:
        self.hub.writer.execute(
            lambda conn: last_values.retain(conn, scope, key, message),
            after_commit=lambda _: remember(),
            single_statement=True,
        )


class SqliteEventHub(HubCore, DurableEventHub):
    """The durable hub; create it with ``Runtime.start(store="state.db")``.

    Raises, when opening: ``StoreLockedError`` (another runtime owns the file),
    ``StoreVersionError`` (the schema is newer than this release, or the file is not an
    orkeon store), ``StoreError`` (the file cannot be opened). Nothing is left running
    when opening fails.
    """

    def __init__(
        self,
        config: StoreConfig,
        clock: Clock,
        scheduler: Scheduler,
        pipeline: Pipeline | None = None,
        *,
        mailboxes_around: Callable[[SqliteMailboxStore], MailboxStore] | None = None,
        last_values_around: Callable[[LastValueStore], LastValueStore] | None = None,
        forward_post: Callable[[Message], bool] | None = None,
    ):
        """``mailboxes_around`` / ``last_values_around`` wrap the SQLite collaborators in
        the ones the hub core gets (how the distributed adapter routes a post to a mailbox
        living on another host): each receives the SQLite one and returns its wrapper."""
        self.mailbox_store = SqliteMailboxStore(self)
        """The durable mailboxes (the local ones: what the hub core's mailbox store keeps here)."""
        self.sent = SqliteSentHistory(self, config.sent_history)
        """The agents' sent history (the hub core's sent recorder, docs/history.md)."""
        self._outbox_chains: dict[str, Next] = {}
        self._outbox_pipeline: Pipeline | None = None
        last_value_store: LastValueStore = _LastValues(self)
        super().__init__(
            clock,
            scheduler,
            pipeline,
            mailbox_store=self.mailbox_store if mailboxes_around is None else mailboxes_around(self.mailbox_store),
            observer=_Dispatch(self),
            last_value_store=last_value_store if last_values_around is None else last_values_around(last_value_store),
            sent_recorder=self.sent,
        )
        self.config = config
        self.forward_post = forward_post
        """For the outbox: forward a post to a mailbox on another host (a fleet host's;
        see :mod:`orkeon_actors.store.outbox`). With it, the outbox rows left pending by
        the last run wait for :meth:`release_outbox` (the broker link must be up)."""
        self._held_outbox: list[OutboxRecord] = []
        self._store_closed = False
        self.dispatch_listeners: list[Callable[[Message], None]] = []
        """Called with every message routed to topics, every reply, and every post kept
        for a parked mailbox, on the thread that dispatched it: how the lifecycle
        supervisor sees triggers for sleeping crews. It must not block, with one
        exception: for a topic message (routed by its publisher, or by the outbox
        dispatcher, never on the writer's thread) it may wait for the store writer (the
        supervisor keeps the event for sleeping crews before the publish returns). A
        post or reply may be dispatched on the writer's thread (an outbox post)."""
        self.route_listeners: list[Callable[[Message], None]] = []
        """Called with every message about to be routed to topics, on the publishing
        thread, *before* any subscriber can receive it (must not block). Each call is
        followed by the :attr:`dispatch_listeners` call for the same message once it is
        routed (also if routing raised). With both, a listener learns of every message
        routed to a subscription opened after it heard of the message's routing, or
        still in flight: how the lifecycle supervisor hands a waking crew the topic
        messages its cursors, not open yet, did not receive."""
        with typed_open_errors(config.path):
            verify_store_file(config.path)  # before the lock file and WAL: a refused file stays as it was
            self._lock = StoreLock(config.path, config.lock_timeout)
        self._cleanup: list[Callable[[], None]] = [self._lock.release]
        try:
            with store_errors(config.path, "opening it"), typed_open_errors(config.path):
                self._open()
        except BaseException:
            self._close_store()
            raise

    def _open(self) -> None:
        config = self.config
        conn = open_connection(config)
        try:
            self.schema_migrated_from, self.schema_version = migrate(conn, config.path)
            faults.arm_from_environment()
            self.sent.open(conn)
            self._seq = mailboxes.next_sequence(conn)
            registry = mailboxes.RegistryCache(config.registry_cache)
            for (scope, key), message in last_values.load_all(conn).items():
                self.remember_last_value(scope, key, message)
            pending = load_pending(conn)
            purge_due = purgeable_rows_exist(conn)
        except BaseException:
            conn.close()
            raise
        try:
            self.checkpointer = Checkpointer(config)
        except BaseException:
            conn.close()
            raise
        self._cleanup.append(self.checkpointer.stop)
        conn.set_wal_hook(self.checkpointer.wal_hook)  # commits no longer checkpoint
        self.writer = StoreWriter(conn, max_batch=config.max_batch, bulk_batch=config.bulk_batch)
        self.writer.on_rollback.append(registry.reload)
        self._cleanup.append(self.writer.stop)
        self.mailbox_store.attach(registry, self._seq)
        self.readers = ReaderPool(config)
        self._cleanup.append(self.readers.close)
        self.outbox = OutboxDispatcher(self)
        self._cleanup.append(self.outbox.stop)
        self.purger = Purger(self.writer, self.clock, self.scheduler, config.purge)
        self._cleanup.append(self.purger.stop)
        if purge_due:
            self.purger.arm()
        if pending and self.forward_post is not None:
            self._held_outbox = pending
        elif pending:
            logger.info(
                "store {}: dispatching {} pending outbox message(s) left by the last run", config.path, len(pending)
            )
            self.outbox.dispatch(pending)

    def release_outbox(self) -> None:
        """Dispatch the outbox rows the last run left pending, held at boot because posts
        are forwarded (``forward_post``) over a link that was not up yet."""
        pending, self._held_outbox = self._held_outbox, []
        if pending:
            logger.info(
                "store {}: dispatching {} pending outbox message(s) left by the last run",
                self.config.path,
                len(pending),
            )
            self.outbox.dispatch(pending)

    def notify(self, message: Message) -> None:
        """Tell every dispatch listener of ``message`` (on this thread)."""
        for listener in self.dispatch_listeners:
            listener(message)

    def park_mailbox(self, registration: MailboxRegistration) -> None:
        """Release the live mailbox actor of ``registration`` but keep the address
        durably registered (its crew goes to sleep): posts to it are kept in the store
        and announced to :attr:`dispatch_listeners`; the next ``register_mailbox`` of the
        address reloads them, oldest first. The message last handed to a consumer is
        acknowledged (it was consumed). Never blocks on the writer."""
        self.park_mailboxes([registration])

    def add_dispatch_observer(self, observer: DispatchObserver) -> None:
        """Tell ``observer`` of every routing (:attr:`route_listeners`) and dispatch
        (:attr:`dispatch_listeners`) from now on."""
        self.route_listeners.append(observer.routing)
        self.dispatch_listeners.append(observer.dispatched)

    def remove_dispatch_observer(self, observer: DispatchObserver) -> None:
        if observer.dispatched in self.dispatch_listeners:
            self.dispatch_listeners.remove(observer.dispatched)
        if observer.routing in self.route_listeners:
            self.route_listeners.remove(observer.routing)

    def defer_acks(self, crew_id: CrewId | str) -> ConsumedLedger:
        """From now on, a message handed out by any mailbox of ``crew_id`` (``crew://``
        or ``agent://crew_id/...``) is *not* acknowledged when its consumer comes back,
        parks or closes its reader: it is appended to the returned ledger and its row
        stays kept until the owner deletes it in the transaction that makes the message's
        effects durable (the lifecycle supervisor: the crew's next snapshot, or its
        completion or failure record). A crash in between redelivers those messages, in
        order, to the crew restored from its previous snapshot. Call it before the crew
        registers its mailboxes; calling it again returns the same ledger."""
        crew = CrewId(crew_id)
        deferred = self.mailbox_store.deferred
        ledger = deferred.get(crew)
        if ledger is None:
            ledger = deferred[crew] = ConsumedLedger()
        return ledger

    def end_deferral(self, crew_id: CrewId | str) -> None:
        """Stop deferring ``crew_id``'s acknowledgements (its live mailboxes are gone:
        parked, closed, or the crew finished). Rows still in its ledger stay kept."""
        self.mailbox_store.deferred.pop(CrewId(crew_id), None)

    def is_parked(self, address: MailboxAddress) -> bool:
        """Whether ``address`` is parked (kept durably, no live mailbox)."""
        return address in self.mailbox_store.parked

    # -- what the writer and the outbox call back -------------------------------------------

    def deliver_live(self, message: Message, seq: int) -> None:
        """Writer thread, after an outbox dispatch committed ``message`` (kept with
        sequence ``seq``): hand it to its live mailbox (see :meth:`_hand_to_live`)."""
        if message.target_mailbox is not None:
            store = self.mailbox_store
            store.hand_to_live(message, store.live.get(message.target_mailbox))

    def route_live(self, message: Message) -> None:
        self._route(message)

    def sent_outgoing(self, conn: apsw.Connection, message: Message, *, delivered: bool) -> None:
        self.sent.complete_outgoing(conn, message, delivered)

    def outbox_dispatched(self) -> None:
        self.purger.arm()

    def next_seq(self) -> int:
        return next(self._seq)

    def now_text(self) -> str:
        return format_time(self.clock.now())

    def outbox_chain(self, operation: str) -> Next:
        """The publish stages of ``operation`` (``post`` / ``publish``) without a
        terminal: what a unit of work runs on its outgoing messages (recomposed when the
        middleware chain changes, as with ``set_tap``)."""
        if self._outbox_pipeline is not self.pipeline:
            pipeline = self.pipeline
            self._outbox_chains = {op: pipeline.publish_chain(op, _identity) for op in ("post", "publish")}
            self._outbox_pipeline = pipeline
        return self._outbox_chains[operation]

    def unit_of_work(
        self, crew_id: CrewId | str, agent_id: AgentId | str | None = None, *, consuming: Message | None = None
    ) -> UnitOfWork:
        """A unit of work for a handler of ``crew_id`` (optionally one of its agents),
        processing ``consuming`` (or nothing, for work not triggered by a message).
        Outgoing messages carry ``crew_id``/``agent_id`` as their source. See
        :class:`~orkeon_actors.store.unit_of_work.UnitOfWork`."""
        crew = CrewId(crew_id)
        agent = None if agent_id is None else AgentId(agent_id)
        if self.stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime")
        return UnitOfWork(self, CallerContext(crew, agent), consuming)

    def acknowledge(self, message: Message) -> None:
        """Acknowledge a consumed mailbox message now (its row is deleted in the next
        group commit, without waiting). Acknowledging twice is harmless."""
        address = message.target_mailbox
        if address is None or message.topic not in MAILBOX_TOPICS:
            return
        store = self.mailbox_store
        store.acks.forget(address, message.id)
        store.ack(address, message.id)

    def is_processed(self, message_id: MessageId | str, crew_id: CrewId | str) -> bool:
        """Whether ``crew_id`` committed the processing of ``message_id``: a unit of work
        consuming it, a lifecycle trigger (topic message, reply, expired wait) its
        snapshot reflects, or the last post of a mailbox its snapshot reflects (the
        crew's high-water mark, :mod:`orkeon_actors.store.marks`; an earlier post's row
        is deleted with that snapshot, so it is never delivered again)."""
        rows = self.readers.query(
            "SELECT 1 FROM processed_messages WHERE message_id = ?1 AND crew_id = ?2 UNION ALL "
            "SELECT 1 FROM mailbox_marks WHERE crew_id = ?2 AND message_id = ?1 LIMIT 1",
            (str(message_id), str(crew_id)),
        )
        return bool(rows)

    def load_snapshot(self, crew_id: CrewId | str) -> SnapshotRecord | None:
        """The crew's last committed snapshot, or ``None``."""
        rows = self.readers.query(
            "SELECT crew_id, snapshot, mode, schema_version, snapshot_at, state FROM crew_snapshots WHERE crew_id = ?",
            (str(crew_id),),
        )
        return snapshot_from_row(rows[0]) if rows else None

    def snapshot_texts(self, crew_ids: Sequence[CrewId | str]) -> dict[str, str]:
        """The committed snapshot bodies (the codec's JSON text) of those of
        ``crew_ids`` that have a snapshot, by crew id: one primary-key query per 500
        ids, each a consistent read (a burst of expiries reads its batch at once)."""
        ids = list(dict.fromkeys(str(c) for c in crew_ids))
        texts: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = self.readers.query(f"SELECT crew_id, snapshot FROM crew_snapshots WHERE crew_id IN ({marks})", chunk)
            for crew_id, body in rows:
                texts[str(crew_id)] = body if isinstance(body, str) else bytes(body).decode()
        return texts

    def load_pending_waits(self, crew_id: CrewId | str | None = None) -> list[PendingWaitRecord]:
        """The committed pending waits of ``crew_id`` (of every crew when ``None``)."""
        columns = (
            "wait_id, crew_id, kind, started_at, expires_at, topic, target_crew_id, target_mailbox, "
            "correlation_id, metadata_match"
        )
        if crew_id is None:
            rows = self.readers.query(f"SELECT {columns} FROM pending_waits ORDER BY started_at, wait_id")
        else:
            rows = self.readers.query(
                f"SELECT {columns} FROM pending_waits WHERE crew_id = ? ORDER BY started_at, wait_id", (str(crew_id),)
            )
        return [pending_wait_from_row(row) for row in rows]

    def kept_messages(self, address: MailboxAddress | str) -> list[Message]:
        """The messages kept for a mailbox (unconsumed or not yet acknowledged), oldest
        first, read from the store."""
        with self.readers.connection() as conn:
            return mailboxes.load_messages(conn, str(MailboxAddress.parse(address)))

    def outbox_records(self, *, pending_only: bool = False) -> list[OutboxRecord]:
        """Rows of the outbox, oldest first (all of them, or only ``Pending`` ones)."""
        from orkeon_actors.store.outbox import load_all

        with self.readers.connection() as conn:
            return load_pending(conn) if pending_only else load_all(conn)

    def purge_now(self) -> PurgeReport:
        """Run the §11.4 purge now (it also runs every ``PurgePolicy.interval``)."""
        return self.purger.purge_now()

    def sent_history(
        self, sender: Endpoint, to: MailboxAddress | None, since_ms: int | None, include_body: bool
    ) -> SentHistory:
        return self.sent.read(sender, None if to is None else endpoint_of(to), since_ms, include_body)

    def verify_sent(self, sender: str | MailboxAddress | Endpoint) -> LedgerReport:
        """Walk ``sender``'s sent ledger (``agent://crew/agent``) to genesis, with its
        pending intents; the report names the first bad position (docs/history.md)."""
        endpoint = sender if isinstance(sender, Endpoint) else parse_sender(str(sender))
        return self.sent.verify(endpoint)

    def is_registered(self, address: MailboxAddress | str) -> bool:
        """Whether ``address`` is durably registered (live in this runtime or not), as
        last committed: one indexed read of ``mailbox_registry``."""
        with self.readers.connection() as conn:
            return mailboxes.is_registered(conn, str(MailboxAddress.parse(address)))

    @property
    def durable_mailboxes(self) -> frozenset[MailboxAddress]:
        """Every address durably registered (live in this runtime or not), read from the
        file: a full read of ``mailbox_registry``, for tools and tests (use
        :meth:`is_registered` for one address)."""
        with self.readers.connection() as conn:
            return frozenset(MailboxAddress.parse(a) for a in mailboxes.registered_addresses(conn))

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop live delivery (blocked callers get ``HubStoppedError``), commit every
        queued write (acknowledgements included), close the store and release its lock.
        Idempotent.

        A clean stop acknowledges every message already handed to a consumer (it was
        consumed: see docs/store.md); only messages a deferring consumer has not
        acknowledged (``defer_acks``) and those never handed out stay kept for the next
        run."""
        if not self.stopped:
            self.mailbox_store.ack_outstanding()
        super().stop()
        self._close_store()

    def _close_store(self) -> None:
        if self._store_closed:
            return
        self._store_closed = True
        for step in reversed(self._cleanup):
            try:
                step()
            except Exception:
                logger.opt(exception=True).error("closing the store failed at {}", step)
        self._cleanup.clear()

    def __repr__(self) -> str:
        return f"SqliteEventHub({self.config.path!r}, durability={self.config.durability.value})"
