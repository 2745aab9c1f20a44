"""Inbox declarations in batches: many crews opening their mailboxes at once cost a few
broker round trips, not one each (:meth:`~orkeon_actors.fleet.gateway.Gateway.open_inbox`).

:class:`InboxDeclarations` queues the inboxes asked for; the link's I/O thread declares
what is queued as one batch (``nowait`` declarations closed by one awaited step,
:meth:`~orkeon_actors.hub.amqp.topology.Declarer.inbox`), then the next batch with what
queued up meanwhile: one batch in flight at a time, so the batches grow with the load.

Guarantees: :meth:`InboxDeclarations.declare` returns once the broker declared and bound
the inbox. Its bound is on the broker's *silence*, not on the queue ahead of it: it
raises ``BrokerUnavailableError`` only if the broker answered nothing of the link's
(:attr:`~orkeon_actors.hub.amqp.link.BrokerLink.last_heard`: consumers' channels,
consumers, batches) for ``timeout`` seconds while it waited (a stalled or unreachable
broker). A burst of 1,000 crews starting together (2,000 declarations and 1,000
consumers for one I/O thread and a loaded broker) thus never fails a crew that is
merely queued behind the others.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from orkeon_actors.errors import BrokerUnavailableError
from orkeon_actors.hub.amqp.link import BrokerLink
from orkeon_actors.hub.amqp.topology import DeclareInboxes, Declarer, InboxCaps
from orkeon_actors.model.address import MailboxAddress

__all__ = ["BATCH", "InboxDeclarations"]

BATCH = 32
"""Inboxes at most per batch: each answered batch is progress the waiters see (a
durable queue declaration took ~13 ms on this 2-core machine's broker at a load of 19,
so a batch is answered within about a second even then)."""

_Item = tuple[MailboxAddress, "Future[None]"]


class InboxDeclarations:
    """Batches of inbox declarations on ``link``'s publishing channel (see the module
    docstring). ``timeout``: seconds without any answer from the broker before a waiter
    gives up. Each inbox is declared with ``caps`` through ``declare_inboxes``
    (:class:`~orkeon_actors.hub.amqp.inbox_probe.InboxProbe`)."""

    def __init__(self, link: BrokerLink, timeout: float, caps: InboxCaps, declare_inboxes: DeclareInboxes) -> None:
        self._link = link
        self._timeout = timeout
        self._caps = caps
        self._declare_inboxes = declare_inboxes
        self._lock = threading.Lock()
        self._queued: list[_Item] = []
        self._in_flight: list[_Item] = []
        self._busy = False
        """A batch is in flight, or a flush is scheduled on the I/O thread."""

    def declare(self, address: MailboxAddress) -> None:
        """Declare ``address``'s inbox bound to its key; wait until the broker did.
        ``BrokerUnavailableError`` if the link has no channel (reconnecting: the slice
        declares it then) or the broker answered nothing for ``timeout`` seconds."""
        done: Future[None] = Future()
        queued_at = time.monotonic()
        with self._lock:
            self._queued.append((address, done))
            flush = not self._busy
            self._busy = True
        if flush:
            self._link.run_on_io_thread(self._flush)
        while True:
            since = max(self._link.last_heard, queued_at)
            left = since + self._timeout - time.monotonic()
            try:
                done.result(max(0.0, left))
                return
            except FutureTimeout:
                if self._link.last_heard <= since:
                    raise BrokerUnavailableError(
                        f"the broker answered nothing for {self._timeout} s while declaring {address}: "
                        "it is unreachable or stalled"
                    ) from None

    def _flush(self) -> None:
        """On the I/O thread: send the next batch, or go idle."""
        with self._lock:
            batch, self._queued = self._queued[:BATCH], self._queued[BATCH:]
            self._in_flight = batch
            self._busy = bool(batch)
        if not batch:
            return
        channel = self._link.channel
        if channel is None:
            self._fail(batch, BrokerUnavailableError("the broker link has no channel (reconnecting)"))
            self._flush()
            return
        declarer = Declarer(self._caps)
        for address, _ in batch:
            declarer.inbox(address)
        declarer.run(channel, lambda: self._answer(batch), self._declare_inboxes)

    def _answer(self, batch: list[_Item]) -> None:
        self._link.heard()
        with self._lock:
            if self._in_flight is not batch:
                return  # taken over by a reconnect's redeclaration
            self._in_flight = []
        for _, done in batch:
            if not done.done():
                done.set_result(None)
        self._flush()

    @staticmethod
    def _fail(batch: list[_Item], error: BaseException) -> None:
        for _, done in batch:
            if not done.done():
                done.set_exception(error)

    def take_all(self) -> list[Future[None]]:
        """On a reconnect, before the slice (which holds every inbox opened) is computed:
        what is queued or in flight, to complete once the slice is declared. A batch
        the old channel never answered is dropped."""
        with self._lock:
            items = self._in_flight + self._queued
            self._in_flight, self._queued = [], []
            self._busy = False
        return [done for _, done in items]
