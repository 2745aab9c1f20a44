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
  there like any other;
* when ``ttl`` seconds pass first, it is refused (``refuse``: dead-lettered with the
  reason).

**FIFO per queue.** What arrives on a queue behind a parked delivery waits behind it
(:meth:`Parking.holds`: the gateway parks it too, whoever its sender is), and parked
deliveries go back to their lane in their queue's order, so an inbox's posts are still
taken in order: a delivery that waits holds its own queue for at most ``ttl``, never
another queue, nor the lane they share.

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


@attrs.define(eq=False)
class _Parked:
    delivery: Delivery
    requeue: Callable[[Delivery], None]
    deadline: float


class Parking:
    """Deliveries waiting for their sender's presence, in their queue's order (module
    docstring). ``known(delivery)`` says whether its sender's presence is known now;
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
        self._parked: dict[str, list[_Parked]] = {}
        """Per queue, in arrival order."""
        self._owed: dict[str, int] = {}
        """Per queue: deliveries parked, or put back on the lane and not taken yet."""
        self._released: set[int] = set()
        """``id()`` of deliveries put back on their lane, not taken yet."""
        self._lock = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def holds(self, delivery: Delivery) -> bool:
        """Whether ``delivery`` must wait behind deliveries of its queue parked before
        it; ``False`` for one this parking put back (taken now: the lane goes on)."""
        with self._lock:
            if id(delivery) in self._released:
                self._released.discard(id(delivery))
                self._owe(delivery.queue, -1)
                return False
            return self._owed.get(delivery.queue, 0) > 0

    def park(self, delivery: Delivery, requeue: Callable[[Delivery], None]) -> None:
        """Hold ``delivery`` behind its queue's parked ones; ``requeue`` puts it back on
        its lane once its sender is known and those before it went back."""
        with self._lock:
            if self._stopped:
                return  # unacknowledged: the broker redelivers it after the reconnect
            self._parked.setdefault(delivery.queue, []).append(_Parked(delivery, requeue, time.monotonic() + self._ttl))
            self._owe(delivery.queue, 1)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._lock.notify()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(entries) for entries in self._parked.values())

    def stop(self) -> None:
        """End the thread; what is parked stays unacknowledged (the broker redelivers it)."""
        with self._lock:
            self._stopped = True
            self._parked.clear()
            self._lock.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _owe(self, queue: str, change: int) -> None:
        owed = self._owed.get(queue, 0) + change
        if owed > 0:
            self._owed[queue] = owed
        else:
            self._owed.pop(queue, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._parked and not self._stopped:
                    self._lock.wait()
                if self._stopped:
                    return
                queues = {queue: list(entries) for queue, entries in self._parked.items()}
            now = time.monotonic()
            for queue, entries in queues.items():
                for entry in entries:  # in order: the first still waiting holds the rest
                    if self._known(entry.delivery):
                        self._settle(queue, entry, released=True)
                        entry.requeue(entry.delivery)
                    elif now >= entry.deadline:
                        self._settle(queue, entry, released=False)
                        self._refuse(
                            entry.delivery,
                            f"SignatureError: no presence names its sender {entry.delivery.headers.get('from')} "
                            f"within {self._ttl} s (its host left the roster, or a replay of a departed sender)",
                        )
                    else:
                        break
            with self._lock:
                if self._parked and not self._stopped:
                    self._lock.wait(POLL)

    def _settle(self, queue: str, entry: _Parked, *, released: bool) -> None:
        """Take ``entry`` off its queue's list: put back on the lane (still owed until
        the lane takes it), or refused (owed no more)."""
        with self._lock:
            entries = self._parked.get(queue, [])
            if entry in entries:
                entries.remove(entry)
            if not entries:
                self._parked.pop(queue, None)
            if released:
                self._released.add(id(entry.delivery))
            else:
                self._owe(queue, -1)
