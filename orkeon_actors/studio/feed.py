"""The Studio's event feed: what happened, pushed to every attached browser.

:class:`StudioFeed` fans events out to :class:`FeedSubscriber` queues, one per attached
browser. Guarantees:

* **Bounded.** Each subscriber holds at most ``capacity`` events; when a slow browser
  falls behind, its *oldest* events are dropped (counted in ``dropped``) and the
  publisher never waits. The feed keeps no history beyond a short ``recent`` ring, which
  a newly attached browser receives first.
* **Free when nobody watches.** :attr:`StudioFeed.watching` is ``False`` with no
  subscriber, and ``on_watching`` tells the owner when that changes (the runtime then
  takes the Studio's stage out of the hub's chain: see
  :meth:`~orkeon_actors.hub.memory.InMemoryEventHub.set_tap`).
* **Thread-safe.** :meth:`emit` may be called from any thread (publishers, mailbox
  actors, the scheduler); subscribers are read from the HTTP server's threads.

An event is a flat JSON-ready ``dict`` (see :func:`event`); ``seq`` increases by one per
emitted event, so a browser can tell it missed some.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Final

__all__ = ["EVENT_KINDS", "FeedSubscriber", "StudioFeed", "event", "rfc3339"]

EVENT_KINDS: Final = (
    "publish",
    "post",
    "send",
    "reply",
    "receive",
    "timeout",
    "acl_refused",
    "wake",
    "sleep",
    "state",
)
"""Every ``kind`` an event can have: the four publish-path operations, a consumption
(``receive``), a wait that timed out, an ACL refusal, and lifecycle changes."""


def rfc3339(instant: datetime) -> str:
    """``instant`` as RFC 3339 in UTC with a ``Z`` and millisecond precision."""
    utc = instant.astimezone(UTC) if instant.tzinfo is not None else instant.replace(tzinfo=UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def event(kind: str, at: datetime, **fields: Any) -> dict[str, Any]:
    """One feed event: ``kind`` (one of :data:`EVENT_KINDS`), ``at`` (RFC 3339) and the
    given fields, ``None`` values left out."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown studio event kind {kind!r}; use one of {', '.join(EVENT_KINDS)}")
    built: dict[str, Any] = {"kind": kind, "at": rfc3339(at)}
    built.update((key, value) for key, value in fields.items() if value is not None)
    return built


class FeedSubscriber:
    """One browser's queue. Iterate with :meth:`take` (blocks up to a timeout)."""

    def __init__(self, feed: StudioFeed, capacity: int) -> None:
        self._feed = feed
        self._events: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._ready = threading.Condition()
        self.dropped = 0
        """Events dropped because this subscriber fell behind."""
        self.closed = False
        self.on_ready: Callable[[], None] | None = None
        """Called (from the offering thread, outside the lock) after each offer and on
        :meth:`close`: the Studio's server wakes its stream's coroutine with it instead of
        blocking a thread in :meth:`take`. It must be short and must not raise."""

    def offer(self, item: dict[str, Any]) -> None:
        with self._ready:
            if len(self._events) == self._events.maxlen:
                self.dropped += 1
            self._events.append(item)
            self._ready.notify()
        ready = self.on_ready
        if ready is not None:
            ready()

    def take(self, timeout: float) -> list[dict[str, Any]]:
        """Every queued event, waiting up to ``timeout`` seconds for the first one;
        ``[]`` on timeout or once closed."""
        with self._ready:
            if not self._events and not self.closed:
                self._ready.wait(timeout)
            taken = list(self._events)
            self._events.clear()
            return taken

    def close(self) -> None:
        """Detach from the feed; a blocked :meth:`take` returns."""
        self._feed.detach(self)
        with self._ready:
            self.closed = True
            self._ready.notify_all()
        ready = self.on_ready
        if ready is not None:
            ready()


class StudioFeed:
    """Fans events out to attached subscribers (see the module docstring)."""

    def __init__(
        self,
        *,
        capacity: int = 2_000,
        recent: int = 200,
        on_watching: Callable[[bool], None] | None = None,
    ) -> None:
        if capacity < 1 or recent < 0:
            raise ValueError(f"capacity must be >= 1 and recent >= 0, got {capacity} and {recent}")
        self._capacity = capacity
        self.on_watching = on_watching
        """Called with ``True`` when the first subscriber attaches and ``False`` when the
        last one leaves (under the feed's lock: it must be short and must not emit)."""
        self._subscribers: tuple[FeedSubscriber, ...] = ()
        self._recent: deque[dict[str, Any]] = deque(maxlen=recent)
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self.emitted = 0

    @property
    def watching(self) -> bool:
        """True while at least one subscriber is attached."""
        return bool(self._subscribers)

    def attach(self) -> FeedSubscriber:
        """A new subscriber, primed with the recent events."""
        subscriber = FeedSubscriber(self, self._capacity)
        with self._lock:
            for item in self._recent:
                subscriber.offer(item)
            self._subscribers = (*self._subscribers, subscriber)
            if len(self._subscribers) == 1 and self.on_watching is not None:
                self.on_watching(True)
        return subscriber

    def detach(self, subscriber: FeedSubscriber) -> None:
        with self._lock:
            before = len(self._subscribers)
            self._subscribers = tuple(s for s in self._subscribers if s is not subscriber)
            if before and not self._subscribers and self.on_watching is not None:
                self.on_watching(False)

    def emit(self, item: dict[str, Any]) -> None:
        """Stamp ``item`` with the next ``seq`` and hand it to every subscriber. A no-op
        while nobody watches."""
        if not self._subscribers:
            return
        with self._lock:
            item["seq"] = next(self._seq)
            self.emitted += 1
            self._recent.append(item)
            subscribers = self._subscribers
        for subscriber in subscribers:
            subscriber.offer(item)

    def subscribers(self) -> Iterator[FeedSubscriber]:
        return iter(self._subscribers)
