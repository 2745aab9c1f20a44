"""The store writer's queue: a bulk lane and an urgent lane, and the rules between them.

A write request may carry a *key*, or several (what it orders against: a mailbox
address, a sender's sent history, a crew), and ask to be *urgent* (a post that wakes a
sleeping crew, the wake's read of its kept events). The writer takes its batches here
(:meth:`WriteQueue.take`):

* **Per key, and around keyless requests, FIFO.** An urgent request enters the urgent
  lane only if no queued bulk request shares a key with it and no keyless request is
  queued in the bulk lane; otherwise it is demoted (``urgent`` set to ``False``) and
  queued in the bulk lane in arrival order. So a request never overtakes an earlier
  one sharing a key with it, nor any earlier keyless one (a keyless request orders
  against everything: a registration, a snapshot save, a unit of work), and a bulk
  request never runs before an urgent one that arrived earlier. Requests of one lane
  keep their arrival order.
* **Urgent first, bulk never starved.** A batch starts with the urgent lane (at most
  ``max_batch``). While bulk requests wait, a batch of urgent requests alone is followed
  by one that keeps room for bulk requests: a bulk request waits for the urgent
  requests that arrived before it and, for each batch taking the bulk requests ahead of
  it, at most one batch of later ones.
* **Bounded bulk batches.** A batch takes at most ``bulk_batch`` bulk requests, so a
  batch in progress holds an urgent request that arrives meanwhile for a bounded time
  (its statements, its commit and its callbacks).
* **Cutting in.** An urgent request that arrives while a bulk batch is being written
  may join it (:meth:`WriteQueue.cut_in`): the writer stops before the batch's next
  statements, writes the urgent requests and commits; the bulk requests it had not
  written go back to the head of the bulk lane, in their order. Only urgent requests
  sharing no key with those requests (none of which may be keyless) cut in, in their
  lane's order, so the rules above hold as if the batch had been that shorter one.

The queue is plain data, not thread-safe: the writer holds its lock around every call.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Generic, Protocol, TypeAlias, TypeVar

from orkeon_actors.errors import InvalidArgumentError

__all__ = ["Key", "Queued", "WriteQueue", "crew_key"]

Key: TypeAlias = str | tuple[str, ...] | None
"""A request's key: one string, several, or ``None`` (orders against every request)."""


def crew_key(crew_id: str) -> str:
    """The key of the writes about one crew's durable state (its kept events, its
    deletion, its outcome): a mailbox address never equals it."""
    return f"crew {crew_id}"


class Queued(Protocol):
    """What the queue reads of a request: its key and whether it asks to be urgent
    (:meth:`WriteQueue.push` clears ``urgent`` when it demotes the request)."""

    key: Key
    urgent: bool


Q = TypeVar("Q", bound=Queued)


class WriteQueue(Generic[Q]):
    """The two lanes; see the module docstring for the rules."""

    def __init__(self, *, max_batch: int = 2048, bulk_batch: int = 128) -> None:
        if max_batch < 1 or bulk_batch < 1:
            raise InvalidArgumentError(
                f"max_batch={max_batch}, bulk_batch={bulk_batch}: a batch must hold at least 1 request"
            )
        self.max_batch = max_batch
        self.bulk_batch = min(bulk_batch, max_batch)
        self._urgent: deque[tuple[int, Q]] = deque()  # (arrival, request)
        self._bulk: deque[tuple[int, Q]] = deque()
        self._arrivals = 0
        self._bulk_keys: Counter[str] = Counter()
        self._bulk_keyless = 0
        self._bulk_waited = False  # the last batch was urgent requests alone while bulk ones waited

    def __len__(self) -> int:
        return len(self._urgent) + len(self._bulk)

    def push(self, request: Q) -> bool:
        """Queue ``request``; whether it went into the urgent lane."""
        key = request.key
        keys = (key,) if isinstance(key, str) else key
        counts = self._bulk_keys
        self._arrivals += 1
        if request.urgent and keys and not self._bulk_keyless and not any(counts[k] for k in keys):
            self._urgent.append((self._arrivals, request))
            return True
        request.urgent = False
        self._bulk.append((self._arrivals, request))
        if not keys:
            self._bulk_keyless += 1
        else:
            counts.update(keys)
        return False

    def take(self) -> list[Q]:
        """The next batch (empty if nothing is queued), in the order to run it."""
        urgent, bulk = self._urgent, self._bulk
        owed = min(len(bulk), self.bulk_batch) if self._bulk_waited else 0  # room kept for bulk
        if owed >= self.max_batch and urgent and bulk[0][0] > urgent[0][0]:
            owed = self.max_batch - 1  # no bulk request may run before that urgent one: take it
        batch = [urgent.popleft()[1] for _ in range(min(len(urgent), self.max_batch - owed))]
        if batch and bulk and not owed:
            self._bulk_waited = True
            return batch
        # A bulk request never runs before an urgent one that arrived earlier.
        before = urgent[0][0] if urgent else self._arrivals + 1
        room = min(len(bulk), self.bulk_batch, self.max_batch - len(batch))
        counts = self._bulk_keys
        for _ in range(room):
            if bulk[0][0] > before:
                break
            request = bulk.popleft()[1]
            self._bulk_waited = False
            key = request.key
            keys = (key,) if isinstance(key, str) else key
            if not keys:
                self._bulk_keyless -= 1
            for k in keys or ():
                if counts[k] == 1:
                    del counts[k]
                else:
                    counts[k] -= 1
            batch.append(request)
        return batch

    def urgent_waiting(self) -> bool:
        """Whether an urgent request is queued (a read the writer may make without the
        lock: a stale answer only delays the cut-in to the next check)."""
        return bool(self._urgent)

    def cut_in(self, rest: list[Q], room: int) -> list[Q]:
        """At most ``room`` urgent requests that may run now, in the middle of a bulk
        batch whose requests ``rest`` (taken from the bulk lane, in order) are not
        written yet; if there are any, ``rest`` goes back to the head of the bulk lane
        (empty list: nothing cut in, ``rest`` is still the caller's). See the module
        docstring."""
        urgent = self._urgent
        if not urgent:
            return []
        keys: set[str] = set()
        for request in rest:
            key = request.key
            if not key:
                return []  # a keyless request orders against every later one
            keys.update((key,) if isinstance(key, str) else key)
        for _, request in urgent:
            key = request.key
            if not key or any(k in keys for k in ((key,) if isinstance(key, str) else key)):
                # It must follow one of ``rest``: once they are queued again it would
                # overtake it from the urgent lane, so nothing cuts in.
                return []
        batch = [urgent.popleft()[1] for _ in range(min(len(urgent), room))]
        if rest:
            # Back at the head, as if never taken: they arrived before every request
            # still queued in the bulk lane and before every urgent one (take()).
            first = self._bulk[0][0] if self._bulk else self._arrivals + 1
            arrival = urgent[0][0] if urgent else first
            start = min(first, arrival) - len(rest)
            self._bulk.extendleft(reversed([(start + i, request) for i, request in enumerate(rest)]))
            for request in rest:
                key = request.key
                self._bulk_keys.update((key,) if isinstance(key, str) else key or ())
        return batch

    def take_all(self) -> list[Q]:
        """Everything queued, in arrival order (the writer fails what is left at stop)."""
        everything = [request for _, request in sorted([*self._urgent, *self._bulk], key=lambda pair: pair[0])]
        self._urgent.clear()
        self._bulk.clear()
        self._bulk_keys.clear()
        self._bulk_keyless = 0
        return everything
