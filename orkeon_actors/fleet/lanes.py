"""The gateway's worker lanes: deliveries handled in arrival order on one thread per lane,
never on the broker link's I/O thread (:class:`~orkeon_actors.fleet.gateway.Gateway`)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from orkeon_actors.hub.amqp.link import Delivery

__all__ = ["Lane"]


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
