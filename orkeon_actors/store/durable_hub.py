"""The durable adapter of the EventHub port: the in-memory hub, made durable on SQLite.

``SqliteEventHub`` *is* the in-memory hub for live delivery (mailbox actors, topic
router, waiters, replies, middleware) with durability around it:

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

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import apsw
from loguru import logger

from orkeon_actors.errors import HubStoppedError, MailboxNotFoundError
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.hub.memory import POST_TOPIC, SEND_TOPIC, InMemoryEventHub
from orkeon_actors.hub.pipeline import Next, Pipeline
from orkeon_actors.hub.port import CallerContext, MailboxRegistration
from orkeon_actors.hub.scheduler import Scheduler
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import AgentId, CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.store import last_values, mailboxes
from orkeon_actors.store.acks import AckTracker, ConsumedLedger
from orkeon_actors.store.checkpointer import Checkpointer
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.config import StoreConfig
from orkeon_actors.store.connection import StoreLock, open_connection
from orkeon_actors.store.outbox import OutboxDispatcher, load_pending
from orkeon_actors.store.purge import Purger, PurgeReport, purgeable_rows_exist
from orkeon_actors.store.reader import ReaderPool
from orkeon_actors.store.records import PendingWaitRecord, SnapshotRecord, pending_wait_from_row, snapshot_from_row
from orkeon_actors.store.schema import migrate
from orkeon_actors.store.unit_of_work import UnitOfWork
from orkeon_actors.store.writer import StoreWriter

if TYPE_CHECKING:
    from orkeon_actors.store.records import OutboxRecord

__all__ = ["SqliteEventHub"]

_MAILBOX_TOPICS = frozenset({POST_TOPIC, SEND_TOPIC})


def _identity(message: Message) -> Message:
    return message


class SqliteEventHub(InMemoryEventHub):
    """The durable hub; create it with ``Runtime.start(store="state.db")``.

    Raises, when opening: ``StoreLockedError`` (another runtime owns the file),
    ``StoreVersionError`` (the schema is newer than this release, or the file is not an
    orkeon store), ``StoreError`` (the file cannot be opened). Nothing is left running
    when opening fails.
    """

    def __init__(self, config: StoreConfig, clock: Clock, scheduler: Scheduler, pipeline: Pipeline | None = None):
        super().__init__(clock, scheduler, pipeline)
        self.config = config
        self._store_closed = False
        self._acks = AckTracker()
        # Crews whose consumed mailbox rows are deleted with their next snapshot.
        self._deferred: dict[CrewId, ConsumedLedger] = {}
        # The live mailbox of each address, as of the last commit: read on the writer
        # thread (a post's after-commit capture), written there in commit order, and by
        # a reopening registration (see _reopen).
        self._live: dict[MailboxAddress, MailboxHandle] = {}
        # Addresses whose registration is being closed (its rows being deleted): a new
        # registration of one of them takes the writer's path (see _reopen).
        self._closing: Counter[MailboxAddress] = Counter()
        # Addresses whose live mailbox was parked (its crew sleeps): posts are kept.
        self._parked: set[MailboxAddress] = set()
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
        self._lock = StoreLock(config.path, config.lock_timeout)
        self._cleanup: list[Callable[[], None]] = [self._lock.release]
        try:
            self._open()
        except BaseException:
            self._close_store()
            raise

    def _compose_chains(self) -> None:
        super()._compose_chains()
        self._outbox_chains: dict[str, Next] = {
            operation: self.pipeline.publish_chain(operation, _identity) for operation in ("post", "publish")
        }

    def _open(self) -> None:
        config = self.config
        conn = open_connection(config)
        try:
            self.schema_migrated_from, self.schema_version = migrate(conn, config.path)
            self._seq = mailboxes.next_sequence(conn)
            self._registry = mailboxes.RegistryCache(config.registry_cache)
            self._last_values.update(last_values.load_all(conn))
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
        self.writer = StoreWriter(conn, max_batch=config.max_batch)
        self.writer.on_rollback.append(self._registry.reload)
        self._cleanup.append(self.writer.stop)
        self._insert_group = mailboxes.InsertGroup(self._registry, self._seq)
        self._ack_group = mailboxes.AckGroup()
        self._unregister_group = mailboxes.UnregisterGroup(self._registry)
        self.readers = ReaderPool(config)
        self._cleanup.append(self.readers.close)
        self.outbox = OutboxDispatcher(self)
        self._cleanup.append(self.outbox.stop)
        self.purger = Purger(self.writer, self.clock, self.scheduler, config.purge)
        self._cleanup.append(self.purger.stop)
        if purge_due:
            self.purger.arm()
        if pending:
            logger.info(
                "store {}: dispatching {} pending outbox message(s) left by the last run", config.path, len(pending)
            )
            self.outbox.dispatch(pending)

    # -- hooks of the in-memory hub ------------------------------------------------------

    def _mailbox_exists(self, address: MailboxAddress) -> bool:
        """Live here, or durably registered (one indexed read of ``mailbox_registry``:
        the registry is not held in memory). A pre-check only: the writer checks again
        inside the transaction that keeps the post."""
        return address in self._mailboxes or self.is_registered(address)

    def _mailbox_opened(self, handle: MailboxHandle) -> None:
        self._mailboxes_opened([handle])

    def _mailboxes_opened(self, handles: Sequence[MailboxHandle]) -> None:
        """Register ``handles`` durably and reload what each kept, oldest first, in one
        transaction (one writer round trip); each becomes live at its commit, before any
        newer post to it is handed over. Handles on addresses already registered are
        reopened without the writer (:meth:`_reopen`)."""
        reopened: list[MailboxHandle] = []
        try:
            rest: list[MailboxHandle] = []
            for handle in handles:
                (reopened if self._reopen(handle) else rest).append(handle)
            if rest:
                self._register_durably(rest)
        except BaseException:
            # All or none: the reopened ones go back to parked (their rows stay kept).
            for handle in reopened:
                handle.parked = True
                self._parked.add(handle.address)
                if self._live.get(handle.address) is handle:
                    del self._live[handle.address]
            raise

    def _register_durably(self, handles: Sequence[MailboxHandle]) -> None:
        keys = [str(handle.address) for handle in handles]
        now = format_time(self.clock.now())

        def work(conn: apsw.Connection) -> list[list[Message]]:
            mailboxes.register_many(conn, keys, now)
            kept = [mailboxes.load_messages(conn, key) for key in keys]
            for key in keys:
                self._registry.add(key)
            return kept

        def install(kept: list[list[Message]]) -> None:
            for handle, messages in zip(handles, kept, strict=True):
                self._parked.discard(handle.address)
                for message in messages:
                    handle.deliver(message)
                self._live[handle.address] = handle

        kept = self.writer.execute(work, after_commit=install)
        for handle, messages in zip(handles, kept, strict=True):
            if messages:
                logger.debug("mailbox {} reopened with {} kept message(s)", handle.address, len(messages))

    def _reopen(self, handle: MailboxHandle) -> bool:
        """Open ``handle`` on an address already durably registered (a parked mailbox of
        a crew waking up, or one registered before a restart) without a writer round
        trip: nothing needs writing, and a woken crew must not wait behind other
        transactions' fsyncs. ``False`` (take the writer's path) for a new address or
        one whose registration is being closed.

        Ordering without the writer: the handle holds its deliveries, becomes the live
        mailbox of its address, and only then reads what is kept. A post committed
        before that point was captured without this handle, so its row is read here; one
        committed after is delivered live into the held handle (and, if it committed
        before the read, read too: it counts once). The kept messages go first, in
        ``seq`` order, then the held ones: the slow path's order."""
        address = handle.address
        key = str(address)
        with self._mailboxes_lock:
            if self._closing[address]:
                return False
        with self.readers.connection() as conn:
            if not mailboxes.is_registered(conn, key):
                return False
            handle.hold()
            self._parked.discard(address)
            self._live[address] = handle
            kept = mailboxes.load_messages(conn, key)
        handle.release(kept)
        if kept:
            logger.debug("mailbox {} reopened with {} kept message(s)", address, len(kept))
        return True

    def _unregister_many(self, handles: Sequence[MailboxHandle]) -> list[list[Message]]:
        """Close ``handles`` live, then unregister them durably (rows and registry) in one
        transaction, waited for. While it runs, a new registration of one of these
        addresses takes the writer's path (see :meth:`_reopen`)."""
        addresses = [handle.address for handle in handles]
        with self._mailboxes_lock:
            self._closing.update(addresses)
        try:
            return self._unregister_durably(handles)
        finally:
            with self._mailboxes_lock:
                self._closing.subtract(addresses)
                for address in addresses:
                    if self._closing[address] <= 0:
                        del self._closing[address]

    def _unregister_durably(self, handles: Sequence[MailboxHandle]) -> list[list[Message]]:
        leftovers = super()._unregister_many(handles)
        for handle in handles:
            self._acks.release(handle.address)
        keys = [str(handle.address) for handle in handles]

        def forget(_: None) -> None:
            for handle in handles:
                if self._live.get(handle.address) is handle:
                    del self._live[handle.address]

        try:
            self.writer.execute_in(self._unregister_group, keys, after_commit=forget)
        except HubStoppedError:
            logger.debug(
                "mailbox(es) {} closed after the runtime stopped: they stay registered in the store", ", ".join(keys)
            )
        return leftovers

    def _deliver_to_mailbox(self, message: Message) -> Message:
        address = message.target_mailbox
        if address is None:
            raise MailboxNotFoundError(address)
        key = str(address)
        live: list[MailboxHandle | None] = [None]

        def capture(_: int) -> None:
            live[0] = self._live.get(address)

        self.writer.execute_in(self._insert_group, (key, mailboxes.insert_params(key, message)), after_commit=capture)
        self._hand_to_live(message, live[0])
        return message

    def _hand_to_live(self, message: Message, handle: MailboxHandle | None) -> None:
        """Hand a committed ``message`` to ``handle``, the mailbox that was live at its
        commit (``None``: nobody held it then, it stays kept and the next registration
        reloads it). A post does this in its own thread, off the writer's path, so one
        poster's messages are handed over in its ``post`` order. Raises
        ``MailboxNotFoundError`` if that registration was closed meanwhile (the close
        deletes the row, so the message is neither delivered nor kept: the poster is
        told); after ``stop`` the message just stays kept."""
        if handle is None:
            if self.dispatch_listeners:
                self._notify(message)  # committed, so registered: kept for a mailbox nobody holds live
            return
        try:
            handle.deliver(message)
        except MailboxNotFoundError:
            if handle.parked:
                self._notify(message)  # parked meanwhile: the row is kept for the wake
            elif not self._stopped:
                raise

    def _notify(self, message: Message) -> None:
        for listener in self.dispatch_listeners:
            listener(message)

    def _route(self, message: Message) -> Message:
        for listener in self.route_listeners:
            listener(message)
        try:
            self._router.route(message)
        finally:
            if self.dispatch_listeners:
                self._notify(message)
        return message

    def _deliver_reply(self, message: Message) -> Message:
        super()._deliver_reply(message)
        if self.dispatch_listeners:
            self._notify(message)
        return message

    def park_mailbox(self, registration: MailboxRegistration) -> None:
        """Release the live mailbox actor of ``registration`` but keep the address
        durably registered (its crew goes to sleep): posts to it are kept in the store
        and announced to :attr:`dispatch_listeners`; the next ``register_mailbox`` of the
        address reloads them, oldest first. The message last handed to a consumer is
        acknowledged (it was consumed). Never blocks on the writer."""
        self.park_mailboxes([registration])

    def park_mailboxes(self, registrations: Sequence[MailboxRegistration]) -> None:
        """:meth:`park_mailbox` for each of ``registrations`` (one writer request for
        all of them)."""
        handles: list[MailboxHandle] = []
        for registration in registrations:
            handle = getattr(registration, "_handle", None)
            if not isinstance(handle, MailboxHandle):
                raise TypeError(f"not a registration of this hub: {registration!r}")
            handles.append(handle)
        for handle in handles:
            address = handle.address
            self._parked.add(address)
            handle.parked = True
            with self._mailboxes_lock:
                if self._mailboxes.get(address) is handle:
                    del self._mailboxes[address]
            previous = self._acks.release(address)
            if previous is not None:
                self._ack(address, previous)
            handle.close()

        def unlive(_: None) -> None:
            for handle in handles:
                if self._live.get(handle.address) is handle:
                    del self._live[handle.address]

        try:
            self.writer.post(lambda conn: None, after_commit=unlive)
        except HubStoppedError:
            logger.debug("mailbox(es) {} parked after the runtime stopped", ", ".join(str(h.address) for h in handles))

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
        ledger = self._deferred.get(crew)
        if ledger is None:
            ledger = self._deferred[crew] = ConsumedLedger()
        return ledger

    def end_deferral(self, crew_id: CrewId | str) -> None:
        """Stop deferring ``crew_id``'s acknowledgements (its live mailboxes are gone:
        parked, closed, or the crew finished). Rows still in its ledger stay kept."""
        self._deferred.pop(CrewId(crew_id), None)

    def is_parked(self, address: MailboxAddress) -> bool:
        """Whether ``address`` is parked (kept durably, no live mailbox)."""
        return address in self._parked

    def _consume(self, receive: Next | None, message: Message) -> Message | None:
        consumed = super()._consume(receive, message)
        address = message.target_mailbox
        if address is not None and message.topic in _MAILBOX_TOPICS:
            ledger = None if address.crew_id is None else self._deferred.get(address.crew_id)
            if consumed is None:  # dropped by a receive stage: nobody will process it
                self._ack(address, message.id)
            elif ledger is not None:  # deleted with the crew's next snapshot
                ledger.add(address, message.id)
            else:
                previous = self._acks.handed(address, message.id)
                if previous is not None:
                    self._ack(address, previous)
        return consumed

    def _reader_closed(self, handle: MailboxHandle) -> None:
        previous = self._acks.release(handle.address)
        if previous is not None:
            self._ack(handle.address, previous)

    def _retain(self, key: tuple[CrewId | None, str], message: Message) -> None:
        scope, name = key
        self.writer.execute(
            lambda conn: last_values.retain(conn, scope, name, message),
            after_commit=lambda _: InMemoryEventHub._retain(self, key, message),
            single_statement=True,
        )

    # -- what the writer and the outbox call back -------------------------------------------

    def deliver_live(self, message: Message, seq: int) -> None:
        """Writer thread, after an outbox dispatch committed ``message`` (kept with
        sequence ``seq``): hand it to its live mailbox (see :meth:`_hand_to_live`)."""
        if message.target_mailbox is not None:
            self._hand_to_live(message, self._live.get(message.target_mailbox))

    def route_live(self, message: Message) -> None:
        self._route(message)

    def outbox_dispatched(self) -> None:
        self.purger.arm()

    def remember_last_value(self, scope: CrewId | None, key: str, message: Message) -> None:
        InMemoryEventHub._retain(self, (scope, key), message)

    def next_seq(self) -> int:
        return next(self._seq)

    def now_text(self) -> str:
        return format_time(self.clock.now())

    def _outbox_chain(self, operation: str) -> Next:
        return self._outbox_chains[operation]

    def _ack(self, address: MailboxAddress, message_id: MessageId) -> None:
        key = str(address)
        try:
            self.writer.post_in(self._ack_group, (key, message_id))
        except HubStoppedError:
            logger.debug("ack of {} not written: the store is closed; it is redelivered after a restart", message_id)

    # -- durable API ------------------------------------------------------------------------

    def unit_of_work(
        self, crew_id: CrewId | str, agent_id: AgentId | str | None = None, *, consuming: Message | None = None
    ) -> UnitOfWork:
        """A unit of work for a handler of ``crew_id`` (optionally one of its agents),
        processing ``consuming`` (or nothing, for work not triggered by a message).
        Outgoing messages carry ``crew_id``/``agent_id`` as their source. See
        :class:`~orkeon_actors.store.unit_of_work.UnitOfWork`."""
        crew = CrewId(crew_id)
        agent = None if agent_id is None else AgentId(agent_id)
        if self._stopped:
            raise HubStoppedError("the runtime was stopped; start a new Runtime")
        return UnitOfWork(self, CallerContext(crew, agent), consuming)

    def acknowledge(self, message: Message) -> None:
        """Acknowledge a consumed mailbox message now (its row is deleted in the next
        group commit, without waiting). Acknowledging twice is harmless."""
        address = message.target_mailbox
        if address is None or message.topic not in _MAILBOX_TOPICS:
            return
        self._acks.forget(address, message.id)
        self._ack(address, message.id)

    def is_processed(self, message_id: MessageId | str, crew_id: CrewId | str) -> bool:
        """Whether ``crew_id`` committed a unit of work consuming ``message_id``."""
        rows = self.readers.query(
            "SELECT 1 FROM processed_messages WHERE message_id = ? AND crew_id = ?", (str(message_id), str(crew_id))
        )
        return bool(rows)

    def load_snapshot(self, crew_id: CrewId | str) -> SnapshotRecord | None:
        """The crew's last committed snapshot, or ``None``."""
        rows = self.readers.query(
            "SELECT crew_id, snapshot, mode, schema_version, snapshot_at, state FROM crew_snapshots WHERE crew_id = ?",
            (str(crew_id),),
        )
        return snapshot_from_row(rows[0]) if rows else None

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
        Idempotent. Messages not acknowledged stay kept for the next run."""
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
