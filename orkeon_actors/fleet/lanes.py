"""The gateway's worker lanes: deliveries handled in arrival order on one thread per lane,
never on the broker link's I/O thread (:class:`~orkeon_actors.fleet.gateway.Gateway`), and
the drain of closing inboxes through the inbox lane (:func:`drain_inboxes`)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout

from loguru import logger

from orkeon_actors.errors import BrokerUnavailableError
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery
from orkeon_actors.hub.amqp.topology import inbox_queue
from orkeon_actors.model.address import MailboxAddress

__all__ = ["Lane", "drain_inboxes"]

_log = logger.bind(component="orkeon_actors.fleet")


class _Fence:
    """A marker: set once every delivery put before it was handled."""

    def __init__(self) -> None:
        self.passed = threading.Event()


class Lane:
    """One worker thread handling deliveries in arrival order, in batches of what has
    arrived (at most ``batch``): an inbox batch shares the store's group commits."""

    def __init__(self, name: str, handle: Callable[[list[Delivery]], None], batch: int = 1) -> None:
        self._queue: queue.SimpleQueue[Delivery | _Fence | None] = queue.SimpleQueue()
        self._handle = handle
        self._batch = batch
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, delivery: Delivery) -> None:
        self._queue.put(delivery)

    def on_lane(self) -> bool:
        """Whether the calling thread is this lane's worker (which cannot wait for itself)."""
        return threading.current_thread() is self._thread

    def fence(self, timeout: float) -> bool:
        """Wait until every delivery put before this call was handled (or skipped by
        :meth:`stop`); whether it was within ``timeout`` seconds. Never call it on the
        lane's own thread (:meth:`on_lane`)."""
        marker = _Fence()
        self._queue.put(marker)
        return marker.passed.wait(timeout)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if isinstance(item, _Fence):
                item.passed.set()
                continue
            batch = [item]
            end = False
            fence: _Fence | None = None
            while len(batch) < self._batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    end = True
                    break
                if isinstance(more, _Fence):
                    fence = more
                    break
                batch.append(more)
            if not self._stopping:  # after stop nothing can be acknowledged: the broker redelivers it
                self._handle(batch)
            if fence is not None:
                fence.passed.set()
            if end:
                return

    def stop(self) -> None:
        """Finish the delivery in hand, skip the rest (unacknowledged, so redelivered to
        the next gateway of this host), end the thread."""
        self._stopping = True
        self._queue.put(None)
        self._thread.join(timeout=10)


def drain_inboxes(lane: Lane, link: BrokerLink, addresses: Sequence[MailboxAddress], timeout: float) -> None:
    """Hand what the inboxes of ``addresses`` (unbound now) hold to ``lane``
    (:meth:`BrokerLink.drain`), then wait until the lane handled it all: the sink kept
    each message in its mailbox (or refused it). What cannot be drained within
    ``timeout`` (per inbox, then for the lane), or a call on the lane's own thread, is
    left to be refused and dead-lettered, so reported to its senders (WARNING)."""
    if not addresses:
        return
    named = ", ".join(map(str, addresses))
    if lane.on_lane():
        _log.warning("{} closed on the gateway's inbox lane: what its inbox holds is dead-lettered and reported", named)
        return
    futures = [(address, link.drain(inbox_queue(address), lane.put)) for address in addresses]
    for address, future in futures:
        try:
            future.result(timeout)
        except (BrokerUnavailableError, FutureTimeout) as exc:
            _log.warning(
                "the inbox of {} was not drained ({}): what it holds is dead-lettered and reported to its senders",
                address,
                str(exc) or f"no answer within {timeout} s",
            )
    if not lane.fence(timeout):
        _log.warning("the inbox lane did not finish within {} s: posts held for {} are dead-lettered", timeout, named)
