"""Deliveries parked alone while their sender's presence is not known (cross-host
messaging design, §10: a check that cannot be decided now must not hold any other
message).

A genuine first message may outrun its sender's announcement on the roster (the roster
queue and an inbox are consumed independently), so a delivery whose claimed sender no
presence names yet cannot be refused at once. It must not be waited for on its lane
either: a replay of captured messages whose sender's host left the roster would then
stall every inbox of the receiving host, one presence TTL per message. Instead the
gateway checks its signature (only a genuine message is parked; a forgery is refused at
once) and hands it to :class:`Parking`, which holds it alone, unacknowledged, while the
lane goes on:

* when the sender's presence is heard, the delivery is put back on its lane and verified
  there like any other (its place in the inbox's order is lost: it is delivered after
  what arrived meanwhile);
* when ``ttl`` seconds pass first, it is refused (``refuse``: dead-lettered with the
  reason).

One thread polls the parked deliveries every :data:`POLL` seconds while any is parked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

import attrs

from orkeon_actors.hub.amqp.link import Delivery

__all__ = ["POLL", "Parking"]

POLL: Final = 0.01


@attrs.define
class _Parked:
    delivery: Delivery
    requeue: Callable[[Delivery], None]
    deadline: float


class Parking:
    """Deliveries waiting, each alone, for their sender's presence (module docstring).
    ``known(delivery)`` says whether its sender's presence is known now;
    ``refuse(delivery, reason)`` dead-letters one whose ``ttl`` ran out."""

    def __init__(
        self,
        name: str,
        known: Callable[[Delivery], bool],
        refuse: Callable[[Delivery, str], None],
        ttl: float,
    ) -> None:
        self._name = name
        self._known = known
        self._refuse = refuse
        self._ttl = ttl
        self._parked: list[_Parked] = []
        self._lock = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def park(self, delivery: Delivery, requeue: Callable[[Delivery], None]) -> None:
        """Hold ``delivery``; ``requeue`` puts it back on its lane once its sender is known."""
        with self._lock:
            if self._stopped:
                return  # unacknowledged: the broker redelivers it after the reconnect
            self._parked.append(_Parked(delivery, requeue, time.monotonic() + self._ttl))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._lock.notify()

    def __len__(self) -> int:
        with self._lock:
            return len(self._parked)

    def stop(self) -> None:
        """End the thread; what is parked stays unacknowledged (the broker redelivers it)."""
        with self._lock:
            self._stopped = True
            self._parked.clear()
            self._lock.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._parked and not self._stopped:
                    self._lock.wait()
                if self._stopped:
                    return
                parked = list(self._parked)
            now = time.monotonic()
            settled: list[_Parked] = []
            for entry in parked:
                if self._known(entry.delivery):
                    entry.requeue(entry.delivery)
                elif now >= entry.deadline:
                    self._refuse(
                        entry.delivery,
                        f"SignatureError: no presence names its sender {entry.delivery.headers.get('from')} "
                        f"within {self._ttl} s (its host left the roster, or a replay of a departed sender)",
                    )
                else:
                    continue
                settled.append(entry)
            with self._lock:
                for entry in settled:
                    self._parked.remove(entry)
                if self._parked and not self._stopped:
                    self._lock.wait(POLL)
