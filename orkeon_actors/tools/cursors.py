"""Topic cursors: what makes a ``wait_for_event`` loop lose nothing (spec §5.2).

A plain topic wait only sees messages published while it waits, so an agent looping on
``wait_for_event`` would miss whatever was published while it was busy between two calls.
A cursor is a hub :class:`~orkeon_actors.hub.port.Subscription` kept open across calls
for one ``(topic pattern, metadata_match)`` of one agent:

* **created** by the first ``wait_for_event`` call for that key, before that call starts
  waiting; so the first call sees what is published after it began, and every later call
  also sees what was published since the previous one returned;
* **read** by every call for the key: the oldest buffered message at once, else a
  blocking take on the subscription (a registered hub wait, timed by the hub's scheduler
  on the runtime clock, never a poll). FIFO, each message once;
* **bounded**: at most ``max_cursors`` cursors per agent (the least recently used idle one
  is closed to open another), each holding at most ``max_buffered`` unread messages (the
  oldest dropped first, counted and reported once as ``missed``);
* **closed** by :meth:`TopicCursors.close` (``EventHubTools.close()``) or on eviction;
  messages still buffered in a closed cursor are discarded, as for any subscription.

Two concurrent waits on the same key would race for the same messages, so the second is
refused rather than served arbitrarily.

Crew agents use the same cursors (``CrewActor``): their parked ``wait_for_event`` is a
non-blocking receive on the cursor's subscription
(:func:`~orkeon_actors.hub.async_wait.receive_async`), and a cursor can be written down
as data and reopened (:meth:`TopicCursors.restore`) with a *backlog* of the messages it
held, served before anything the new subscription receives, the drops not yet reported,
and the ids it recently handed out (so a message offered again, a wake's trigger say,
is not handed out twice).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Final

from orkeon_actors.errors import ToolValidationError
from orkeon_actors.hub.client import HubClient
from orkeon_actors.hub.port import Subscription
from orkeon_actors.model.message import FrozenMap, Message

__all__ = ["DEFAULT_MAX_BUFFERED", "DEFAULT_MAX_CURSORS", "RECENT_IDS", "Cursor", "CursorKey", "TopicCursors"]

DEFAULT_MAX_CURSORS: Final = 16
DEFAULT_MAX_BUFFERED: Final = 10_000
RECENT_IDS: Final = 64
"""How many ids of messages handed out a cursor remembers (to refuse a repeat)."""

CursorKey = tuple[str, FrozenMap | None]


class Cursor:
    """One open subscription, what was already reported of its drops, and (for a
    restored cursor) a backlog served first. Thread-safe as far as its subscription is;
    the backlog and the counters belong to the one consumer of the cursor."""

    __slots__ = (
        "_lock",
        "backlog",
        "busy",
        "carried_missed",
        "key",
        "recent",
        "reported_dropped",
        "subscription",
        "taken",
    )

    def __init__(self, key: CursorKey, subscription: Subscription, max_taken: int = DEFAULT_MAX_BUFFERED) -> None:
        self.key = key
        self.subscription = subscription
        self.busy = False
        self.reported_dropped = 0
        self.backlog: deque[Message] = deque()
        self.carried_missed = 0
        self.recent: deque[str] = deque(maxlen=RECENT_IDS)
        self.taken: deque[str] = deque(maxlen=max_taken)
        """Ids of every message handed out since the cursor opened (its newest
        ``max_buffered``): what a snapshot of its owner reflects of it, so the durable
        copies of those messages can be deleted with that snapshot."""
        self._lock = threading.Lock()  # guards ``recent`` and ``taken``: a wait's taker records on its own thread

    def take_missed(self) -> int:
        """Messages dropped since the last call (reported once)."""
        dropped = self.subscription.dropped
        missed = dropped - self.reported_dropped + self.carried_missed
        self.reported_dropped = dropped
        self.carried_missed = 0
        return missed

    def poll(self) -> Message | None:
        """The next message without waiting: the backlog's oldest, else the
        subscription's oldest buffered one; ``None`` if there is none."""
        message = self.backlog.popleft() if self.backlog else self.subscription.poll()
        if message is not None:
            self.handed_out(message)
        return message

    def handed_out(self, message: Message) -> None:
        """Record that ``message`` was taken from this cursor (any thread)."""
        key = str(message.id)
        with self._lock:
            if not self.recent or self.recent[-1] != key:
                self.recent.append(key)
                self.taken.append(key)

    def taken_ids(self) -> list[str]:
        """Ids of the messages handed out since the cursor opened (the newest
        ``max_buffered``), oldest first."""
        with self._lock:
            return list(self.taken)

    def recent_ids(self) -> list[str]:
        """Ids of the messages taken last, oldest first."""
        with self._lock:
            return list(self.recent)

    def offer(self, message: Message) -> bool:
        """Buffer ``message`` (one that matches the cursor but reached its consumer by
        another path, e.g. a wake's trigger) unless this cursor already handed it out or
        holds it. Returns whether it was buffered."""
        key = str(message.id)
        with self._lock:
            seen = key in self.recent
        if seen or any(m.id == message.id for m in self.pending()):
            return False
        self.subscription.inject(message)  # a wait parked on the subscription takes it at once
        return True

    def pending(self) -> list[Message]:
        """What the cursor holds, oldest first, without taking it."""
        return [*self.backlog, *self.subscription.pending()]


class TopicCursors:
    """The cursors of one agent. Thread-safe."""

    def __init__(
        self, client: HubClient, *, max_cursors: int = DEFAULT_MAX_CURSORS, max_buffered: int = DEFAULT_MAX_BUFFERED
    ) -> None:
        for name, value in (("max_cursors", max_cursors), ("max_buffered", max_buffered)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self._client = client
        self._max_cursors = max_cursors
        self._max_buffered = max_buffered
        self._lock = threading.Lock()
        self._cursors: OrderedDict[CursorKey, Cursor] = OrderedDict()
        self._closed = False

    def acquire(self, topic: str, metadata_match: FrozenMap | None) -> Cursor:
        """The cursor for ``(topic, metadata_match)``, opened if needed and marked busy;
        hand it back with :meth:`release`.

        Raises ``ToolValidationError`` (field ``topic``) while another call waits on the
        same cursor, and ``ValueError`` once closed.
        """
        key: CursorKey = (topic, metadata_match or None)
        with self._lock:
            if self._closed:
                raise ValueError("these tools were closed; create a new EventHubTools")
            cursor = self._cursors.get(key)
            if cursor is None:
                subscription = self._client.subscribe(
                    topic, metadata_match=metadata_match, max_buffered=self._max_buffered
                )
                cursor = self._cursors[key] = Cursor(key, subscription, self._max_buffered)
                cursor.busy = True
                self._evict_idle()
                return cursor
            if cursor.busy:
                raise ToolValidationError(
                    f"another wait_for_event on {topic!r} with the same metadata_match is still waiting; "
                    "wait for its result instead of calling it twice at once",
                    field="topic",
                )
            self._cursors.move_to_end(key)
            cursor.busy = True
            return cursor

    def open(self, topic: str, metadata_match: FrozenMap | None) -> Cursor:
        """The cursor for ``(topic, metadata_match)``, opened if needed, marked most
        recently used but *not* busy: for a consumer that serialises its own calls (a
        crew agent, whose crew thread runs one tool call at a time). Raises
        ``ValueError`` once closed."""
        cursor = self.acquire(topic, metadata_match)
        self.release(cursor)
        return cursor

    def get(self, topic: str, metadata_match: FrozenMap | None) -> Cursor | None:
        """The open cursor for the key, if any (its recency unchanged)."""
        with self._lock:
            return self._cursors.get((topic, metadata_match or None))

    def restore(
        self,
        topic: str,
        metadata_match: FrozenMap | None,
        backlog: Iterable[Message] = (),
        missed: int = 0,
        recent: Iterable[str] = (),
    ) -> Cursor:
        """Reopen a cursor written down earlier: a new subscription (it sees what is
        published from now on), behind ``backlog`` (what the old one held), with
        ``missed`` drops still to report and the ids it ``recent``-ly handed out. The
        backlog is cut to ``max_buffered`` newest, the cut counted as missed."""
        cursor = self.open(topic, metadata_match)
        items = list(backlog)
        excess = max(0, len(items) - self._max_buffered)
        cursor.backlog.extend(items[excess:])
        cursor.carried_missed += missed + excess
        cursor.recent.extend(recent)
        return cursor

    def catch_up(self, cursor: Cursor, messages: Iterable[Message]) -> int:
        """Hand ``cursor`` the matching ``messages`` (in publish order) that were
        published while it was not open: a restored cursor reopened after some of them.
        Its new subscription holds the ones published since it opened, a suffix of
        ``messages``; those before the first one it holds go to the backlog, behind
        what the cursor held already, unless it holds or recently handed them out
        (dedupe by id). Call it before anything reads the cursor. The backlog stays
        within ``max_buffered`` (the oldest dropped, counted as missed). Returns how
        many were added."""
        items = list(messages)
        held = {m.id for m in cursor.subscription.pending()}
        cut = next((i for i, m in enumerate(items) if m.id in held), len(items))
        seen = {m.id for m in cursor.backlog} | {str(i) for i in cursor.recent_ids()}
        added = 0
        for message in items[:cut]:
            if message.id in seen or str(message.id) in seen:
                continue
            seen.add(message.id)
            cursor.backlog.append(message)
            added += 1
        excess = len(cursor.backlog) + len(held) - self._max_buffered
        while excess > 0 and cursor.backlog:
            cursor.backlog.popleft()
            cursor.carried_missed += 1
            excess -= 1
        return added

    def cursors(self) -> list[Cursor]:
        """The open cursors, least recently used first."""
        with self._lock:
            return list(self._cursors.values())

    def release(self, cursor: Cursor) -> None:
        with self._lock:
            cursor.busy = False

    def _evict_idle(self) -> None:
        """Under the lock: close least recently used idle cursors beyond the bound."""
        excess = len(self._cursors) - self._max_cursors
        for key in [k for k, c in self._cursors.items() if not c.busy][: max(excess, 0)]:
            self._cursors.pop(key).subscription.close()

    def keys(self) -> list[CursorKey]:
        """The open cursors, least recently used first."""
        with self._lock:
            return list(self._cursors)

    def close(self) -> None:
        """Close every cursor (idempotent). A wait in progress ends with the
        subscription-closed error."""
        with self._lock:
            self._closed = True
            cursors = list(self._cursors.values())
            self._cursors.clear()
        for cursor in cursors:
            cursor.subscription.close()
