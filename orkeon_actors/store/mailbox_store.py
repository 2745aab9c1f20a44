"""``SqliteMailboxStore``: the durable mailboxes of the SQLite adapter, as the hub core's
:class:`~orkeon_actors.hub.memory.MailboxStore` (Orkeon EventHub & Crew Lifecycle
specification, §10.4, §11, §16.2).

* **append** (post / send): the message is inserted into ``mailboxes`` by the writer and
  the call returns only after that transaction committed (group commit); the message is
  then handed to the mailbox that was live at the commit, on the poster's thread, so the
  live queue and the durable rows always agree on order;
* **opened** registers the addresses durably and reloads what each kept, oldest first,
  before any newer post reaches it (an address already registered is reopened without
  a writer round trip: :meth:`SqliteMailboxStore.reopen`);
* **consumed** does not delete at once: a row is deleted when the message is
  acknowledged (:mod:`orkeon_actors.store.acks`), or, for a crew whose acknowledgements
  are deferred, with its next snapshot;
* **park** releases the live mailbox and keeps the address registered: later posts are
  kept and announced to the dispatch observers (the crew's wake);
* **unregister** deletes the rows and the registration in one transaction, waited for.

Every method runs on the calling thread of the hub operation; the writer's callbacks
run on its thread, in commit order.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Final

import apsw
from loguru import logger

from orkeon_actors.errors import HubStoppedError, MailboxNotFoundError
from orkeon_actors.hub.collaborators import registration_failure_handler
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.hub.port import POST_TOPIC, SEND_TOPIC
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.store import mailboxes
from orkeon_actors.store.absent_cache import AbsentAddresses
from orkeon_actors.store.acks import AckTracker, ConsumedLedger
from orkeon_actors.store.codec import format_time

if TYPE_CHECKING:
    from orkeon_actors.store.durable_hub import SqliteEventHub

__all__ = ["MAILBOX_TOPICS", "SqliteMailboxStore"]

MAILBOX_TOPICS: Final = frozenset({POST_TOPIC, SEND_TOPIC})

_pipelined = threading.local()
"""``future``: set by :meth:`SqliteMailboxStore.post_nowait` for the append of the post
running on this thread, taken by that append."""


class SqliteMailboxStore:
    """The durable mailboxes of one :class:`~orkeon_actors.store.SqliteEventHub` (see
    the module docstring). Created before the hub core, attached to the store once it
    is open (:meth:`attach`)."""

    def __init__(self, hub: SqliteEventHub) -> None:
        self.hub = hub
        self.acks = AckTracker()
        self.deferred: dict[CrewId, ConsumedLedger] = {}
        """Crews whose consumed mailbox rows are deleted with their next snapshot."""
        self.live: dict[MailboxAddress, MailboxHandle] = {}
        """The live mailbox of each address, as of the last commit: read on the writer
        thread (a post's after-commit capture), written there in commit order, and by a
        reopening registration (see :meth:`reopen`)."""
        self.closing: Counter[MailboxAddress] = Counter()
        """Addresses whose registration is being closed (its rows being deleted): a new
        registration of one of them takes the writer's path (see :meth:`reopen`)."""
        self._closing_lock = threading.Lock()
        self.parked: set[MailboxAddress] = set()
        """Addresses whose live mailbox was parked (its crew sleeps): posts are kept."""
        self.absent = AbsentAddresses()
        """Addresses read unregistered since the last registration (:meth:`exists`)."""

    def attach(self, registry: mailboxes.RegistryCache, seq: Iterator[int]) -> None:
        """The store is open: its registry cache and its message sequence."""
        self.registry = registry
        self.insert_group = mailboxes.InsertGroup(registry, seq)
        self.ack_group = mailboxes.AckGroup()
        self.unregister_group = mailboxes.UnregisterGroup(registry)

    # -- the MailboxStore of the hub core -------------------------------------------------

    def exists(self, address: MailboxAddress) -> bool:
        """Durably registered (one indexed read of ``mailbox_registry``: the registry is
        not held in memory; a "no" is remembered until the next registration,
        :mod:`~orkeon_actors.store.absent_cache`). A pre-check only: the writer checks
        again inside the transaction that keeps the post."""
        absent = self.absent
        if absent.known_absent(address):
            return False
        generation = absent.generation()
        if self.hub.is_registered(address):
            return True
        absent.remember(address, generation)
        return False

    def opened(self, handles: Sequence[MailboxHandle]) -> None:
        """Register ``handles`` durably and reload what each kept, oldest first, in one
        transaction (one writer round trip); each becomes live at its commit, before any
        newer post to it is handed over. Handles on addresses already registered are
        reopened without the writer (:meth:`reopen`)."""
        reopened: list[MailboxHandle] = []
        try:
            rest = self.reopen(handles, reopened)
            if rest:
                self._register_durably(rest)
        except BaseException:
            # All or none: the reopened ones go back to parked (their rows stay kept).
            for handle in reopened:
                handle.parked = True
                self.parked.add(handle.address)
                if self.live.get(handle.address) is handle:
                    del self.live[handle.address]
            raise

    def _register_durably(self, handles: Sequence[MailboxHandle]) -> None:
        keys = [str(handle.address) for handle in handles]
        now = format_time(self.hub.clock.now())
        registry = self.registry

        def work(conn: apsw.Connection) -> list[list[Message]]:
            mailboxes.register_many(conn, keys, now)
            kept = [mailboxes.load_messages(conn, key) for key in keys]
            for key in keys:
                registry.add(key)
            return kept

        def install(kept: list[list[Message]]) -> None:
            self.absent.registering()
            for handle, messages in zip(handles, kept, strict=True):
                self.parked.discard(handle.address)
                for message in messages:
                    handle.deliver(message)
                self.live[handle.address] = handle
                if messages:
                    logger.debug("mailbox {} reopened with {} kept message(s)", handle.address, len(messages))

        self.absent.registering()
        on_failure = registration_failure_handler()
        if on_failure is None:
            self.hub.writer.execute(work, after_commit=install)
        else:  # queued ahead of any later write of these mailboxes; not waited for
            self.hub.writer.post(work, after_commit=install, on_error=on_failure)

    def reopen(self, handles: Sequence[MailboxHandle], reopened: list[MailboxHandle]) -> list[MailboxHandle]:
        """Open ``handles`` on addresses already durably registered (the parked
        mailboxes of a crew waking up, or ones registered before a restart) without a
        writer round trip: nothing needs writing, and a woken crew must not wait behind
        other transactions' fsyncs. The ones reopened are appended to ``reopened`` (as
        they are, so that a caller can undo them if a later step fails); returns the
        rest, which take the writer's path: new addresses, and those whose
        registration is being closed. Two reads for all of them, on one connection.

        Ordering without the writer: each handle holds its deliveries, becomes the live
        mailbox of its address, and only then is what is kept read. A post committed
        before that point was captured without this handle, so its row is read here; one
        committed after is delivered live into the held handle (and, if it committed
        before the read, read too: it counts once). The kept messages go first, in
        ``seq`` order, then the held ones: the slow path's order."""
        rest: list[MailboxHandle] = []
        with self._closing_lock:
            candidates: list[MailboxHandle] = []
            for handle in handles:
                (rest if self.closing[handle.address] else candidates).append(handle)
        if not candidates:
            return rest
        kept: dict[str, list[Message]] = {}
        opening: list[tuple[MailboxHandle, str]] = []
        with self.hub.readers.connection() as conn:
            keys = [str(handle.address) for handle in candidates]
            registered = mailboxes.registered_among(conn, keys)
            for handle, key in zip(candidates, keys, strict=True):
                if key not in registered:
                    rest.append(handle)
                    continue
                handle.hold()
                self.parked.discard(handle.address)
                self.live[handle.address] = handle
                reopened.append(handle)
                opening.append((handle, key))
            if opening:
                kept = mailboxes.load_messages_of(conn, [key for _, key in opening])
        for handle, key in opening:
            messages = kept.get(key, [])
            handle.release(messages)
            if messages:
                logger.debug("mailbox {} reopened with {} kept message(s)", handle.address, len(messages))
        return rest

    def unregister(
        self, handles: Sequence[MailboxHandle], close_live: Callable[[Sequence[MailboxHandle]], list[list[Message]]]
    ) -> list[list[Message]]:
        """Close ``handles`` live, then unregister them durably (rows and registry) in one
        transaction, waited for. While it runs, a new registration of one of these
        addresses takes the writer's path (see :meth:`reopen`)."""
        addresses = [handle.address for handle in handles]
        with self._closing_lock:
            self.closing.update(addresses)
        try:
            return self._unregister_durably(handles, close_live)
        finally:
            with self._closing_lock:
                self.closing.subtract(addresses)
                for address in addresses:
                    if self.closing[address] <= 0:
                        del self.closing[address]

    def _unregister_durably(
        self, handles: Sequence[MailboxHandle], close_live: Callable[[Sequence[MailboxHandle]], list[list[Message]]]
    ) -> list[list[Message]]:
        leftovers = close_live(handles)
        for handle in handles:
            self.acks.release(handle.address)
        keys = [str(handle.address) for handle in handles]

        def forget(_: None) -> None:
            for handle in handles:
                if self.live.get(handle.address) is handle:
                    del self.live[handle.address]

        try:
            self.hub.writer.execute_in(self.unregister_group, keys, after_commit=forget, key=tuple(keys))
        except HubStoppedError:
            logger.debug(
                "mailbox(es) {} closed after the runtime stopped: they stay registered in the store", ", ".join(keys)
            )
        return leftovers

    def post_nowait(self, post: Callable[[], Message]) -> Future[Message]:
        """Run ``post`` (the hub's whole post chain, on this thread) with its
        :meth:`append` queued for the next group commit instead of waited for. The
        future completes on the writer thread, right after the commit, once the message
        was handed to the mailbox live then (so one thread's posts are handed over in
        their order, as the writer commits them in that order); it fails with the
        write's error (``StoreWriteError``, ``HubStoppedError``) or the hand-over's
        (``MailboxNotFoundError``: the registration was closed meanwhile). A chain that
        ends without an append (a stage that kept the message to itself) completes it
        at once."""
        future: Future[Message] = Future()
        _pipelined.future = future
        try:
            message = post()
        finally:
            taken = _pipelined.future is None
            _pipelined.future = None
        if not taken:
            future.set_result(message)
        return future

    @staticmethod
    def take_pipelined() -> Future[Message] | None:
        """The future of the :meth:`post_nowait` running on this thread, if its write
        was not queued yet; taking it makes the caller responsible for completing it
        (at its commit) and makes every later write of this post wait as usual."""
        future: Future[Message] | None = getattr(_pipelined, "future", None)
        _pipelined.future = None
        return future

    def append(self, message: Message) -> None:
        address = message.target_mailbox
        if address is None:
            raise MailboxNotFoundError(address)
        key = str(address)
        future = self.take_pipelined()
        if future is not None:
            self._append_nowait(message, address, key, future)
            return
        live: list[MailboxHandle | None] = [None]

        def capture(_: int) -> None:
            live[0] = self.live.get(address)

        self.hub.writer.execute_in(
            self.insert_group,
            (key, mailboxes.insert_params(key, message)),
            after_commit=capture,
            key=key,
            urgent=self.wakes_a_crew(address),
        )
        self.hand_to_live(message, live[0])

    def append_many(self, messages: Sequence[Message]) -> list[BaseException | None]:
        """:meth:`append` for several messages at once, so that they share the writer's
        group commits: each is kept, then handed to the mailbox live at its commit, in
        order. The outcome of each: ``None``, or the error that refused it
        (``MailboxNotFoundError``, a store error); one refusal does not stop the others."""
        submitted: list[tuple[Message, list[MailboxHandle | None], Waiter[int] | BaseException]] = []
        for message in messages:
            address = message.target_mailbox
            if address is None:
                submitted.append((message, [None], MailboxNotFoundError(address)))
                continue
            key = str(address)
            live: list[MailboxHandle | None] = [None]

            def capture(_: int, live: list[MailboxHandle | None] = live, address: MailboxAddress = address) -> None:
                live[0] = self.live.get(address)

            submitted.append(
                (
                    message,
                    live,
                    self.hub.writer.submit_in(
                        self.insert_group,
                        (key, mailboxes.insert_params(key, message)),
                        after_commit=capture,
                        key=key,
                        urgent=self.wakes_a_crew(address),
                    ),
                )
            )
        outcomes: list[BaseException | None] = []
        for message, live, pending in submitted:
            try:
                if isinstance(pending, BaseException):
                    raise pending
                pending.wait()
                self.hand_to_live(message, live[0])
            except Exception as exc:  # told to the caller, per message
                outcomes.append(exc)
            else:
                outcomes.append(None)
        return outcomes

    def _append_nowait(self, message: Message, address: MailboxAddress, key: str, future: Future[Message]) -> None:
        def committed(_: int) -> None:  # on the writer thread, in commit order
            self.hand_to_live(message, self.live.get(address))  # raising fails the future (on_error)
            future.set_result(message)

        def failed(error: BaseException) -> None:
            if not future.done():
                future.set_exception(error)

        self.hub.writer.post_in(
            self.insert_group,
            (key, mailboxes.insert_params(key, message)),
            after_commit=committed,
            on_error=failed,
            key=key,
            urgent=self.wakes_a_crew(address),
        )

    def wakes_a_crew(self, address: MailboxAddress) -> bool:
        """Whether a post to ``address`` goes in the writer's urgent lane: no mailbox
        holds the address live (a sleeping crew's, or one kept across a restart), so
        the post is what wakes its crew. Posts carry their address as their key, so
        the writer keeps each mailbox's posts in order whatever their lane."""
        return address not in self.live

    def hand_to_live(self, message: Message, handle: MailboxHandle | None) -> None:
        """Hand a committed ``message`` to ``handle``, the mailbox that was live at its
        commit (``None``: nobody held it then, it stays kept and the next registration
        reloads it). A post does this in its own thread, off the writer's path, so one
        poster's messages are handed over in its ``post`` order. Raises
        ``MailboxNotFoundError`` if that registration was closed meanwhile (the close
        deletes the row, so the message is neither delivered nor kept: the poster is
        told); after ``stop`` the message just stays kept."""
        hub = self.hub
        if handle is None:
            if hub.dispatch_listeners:
                hub.notify(message)  # committed, so registered: kept for a mailbox nobody holds live
            return
        try:
            handle.deliver(message)
        except MailboxNotFoundError:
            if handle.parked:
                hub.notify(message)  # parked meanwhile: the row is kept for the wake
            elif not hub.stopped:
                raise

    def park(self, handles: Sequence[MailboxHandle], unlive: Callable[[MailboxHandle], None]) -> None:
        """Release the live mailboxes of ``handles`` but keep their addresses durably
        registered; the message last handed to a consumer is acknowledged (it was
        consumed). One writer request for all of them; never blocks on the writer."""
        for handle in handles:
            address = handle.address
            self.parked.add(address)
            handle.parked = True
            unlive(handle)
            previous = self.acks.release(address)
            if previous is not None:
                self.ack(address, previous)
            handle.close()

        def forget(_: None) -> None:
            for handle in handles:
                if self.live.get(handle.address) is handle:
                    del self.live[handle.address]

        try:
            self.hub.writer.post(lambda conn: None, after_commit=forget)
        except HubStoppedError:
            logger.debug("mailbox(es) {} parked after the runtime stopped", ", ".join(str(h.address) for h in handles))

    def consumed(self, message: Message, consumed: Message | None) -> None:
        address = message.target_mailbox
        if address is not None and message.topic in MAILBOX_TOPICS:
            ledger = None if address.crew_id is None else self.deferred.get(address.crew_id)
            if consumed is None:  # dropped by a receive stage: nobody will process it
                self.ack(address, message.id)
            elif ledger is not None:  # deleted with the crew's next snapshot
                ledger.add(address, message.id)
            else:
                previous = self.acks.handed(address, message.id)
                if previous is not None:
                    self.ack(address, previous)

    def reader_closed(self, handle: MailboxHandle) -> None:
        self.receiving(handle.address)

    def receiving(self, address: MailboxAddress) -> None:
        """The consumer came back to ``address``: it is done with the message handed to
        it before, whatever this attempt brings (a message, a timeout, a cancellation).
        A deferring crew's messages are in its ledger instead, never here."""
        previous = self.acks.release(address)
        if previous is not None:
            self.ack(address, previous)

    def ack_outstanding(self) -> None:
        """A clean stop: every message already handed to a consumer was consumed
        (docs/store.md); acknowledge it. Deferred ones (a crew's ledger) stay kept."""
        for address, message_id in self.acks.outstanding().items():
            self.acks.forget(address, message_id)
            self.ack(address, message_id)

    # -- acknowledgements --------------------------------------------------------------

    def ack(self, address: MailboxAddress, message_id: MessageId) -> None:
        """Queue the deletion of an acknowledged row (the next group commit)."""
        try:
            key = str(address)
            self.hub.writer.post_in(self.ack_group, (key, message_id), key=key)
        except HubStoppedError:
            logger.debug("ack of {} not written: the store is closed; it is redelivered after a restart", message_id)
