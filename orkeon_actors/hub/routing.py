"""Topic routing: AMQP-style patterns and the copy-on-write subscriber index.

Patterns are dot-separated words where ``*`` matches exactly one word and ``#`` zero or
more, so ``orders.*`` matches ``orders.created`` but not ``orders`` or
``orders.eu.created``, and ``orders.#`` matches all three. The same semantics hold on
RabbitMQ, so a pattern means the same thing on every adapter.

Publishing reads an immutable snapshot (no lock on the hot path); subscribing and
unsubscribing replace it under a lock. A subscriber added before ``publish`` reads the
snapshot is always seen (no lost wake-up).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Protocol

from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import FrozenMap, Message

__all__ = ["topic_matches", "TopicRouter", "RouteEntry", "scope_allows", "metadata_allows", "cursor_matches"]

_CACHE_LIMIT = 10_000


@functools.lru_cache(maxsize=16_384)
def topic_matches(pattern: str, topic: str) -> bool:
    """True when ``topic`` matches ``pattern`` (``*`` one word, ``#`` zero or more)."""
    if "*" not in pattern and "#" not in pattern:
        return pattern == topic
    return _match_words(tuple(pattern.split(".")), tuple(topic.split(".")))


def _match_words(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    # Classic DP over (pattern index, word index); patterns are short.
    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(words)
        head = pattern[i]
        if head == "#":
            return match(i + 1, j) or (j < len(words) and match(i, j + 1))
        if j == len(words):
            return False
        return (head == "*" or head == words[j]) and match(i + 1, j + 1)

    return match(0, 0)


def scope_allows(subscriber_crew: CrewId, message: Message) -> bool:
    """Spec §10.1: a subscriber of crew Y sees messages whose target is ``None`` or Y;
    a system subscriber sees everything."""
    target = message.target_crew_id
    return target is None or subscriber_crew.is_system or target == subscriber_crew


def metadata_allows(match: FrozenMap | None, message: Message) -> bool:
    """Whether ``message``'s metadata contains every pair of ``match`` (``None`` or
    empty: any message)."""
    if not match:
        return True
    metadata = message.metadata
    return all(metadata.get(key) == value for key, value in match.items())


def cursor_matches(pattern: str, metadata_match: FrozenMap | None, crew_id: CrewId, message: Message) -> bool:
    """Whether a topic cursor (or a parked topic wait) of crew ``crew_id`` on
    ``(pattern, metadata_match)`` receives ``message``: not a ``_system.`` message, the
    topic matches the pattern, the scope lets the crew see it (§10.1) and the metadata
    match holds. The one predicate of every path that hands a topic message to a
    cursor without the router (offers, handovers, kept events, sleeping waits)."""
    return (
        not message.topic.startswith("_system.")
        and topic_matches(pattern, message.topic)
        and scope_allows(crew_id, message)
        and metadata_allows(metadata_match, message)
    )


class RouteEntry(Protocol):
    """Something the router hands matching messages to (a subscription, a topic wait)."""

    pattern: str
    crew_id: CrewId
    metadata_match: FrozenMap | None

    def offer(self, message: Message) -> None: ...


class TopicRouter:
    """The subscriber index of one hub. Thread-safe; ``match`` is lock-free."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: tuple[RouteEntry, ...] = ()
        self._cache: dict[str, tuple[RouteEntry, ...]] = {}

    def add(self, entry: RouteEntry) -> None:
        with self._lock:
            self._entries = (*self._entries, entry)
            self._cache = {}

    def remove(self, entry: RouteEntry) -> None:
        with self._lock:
            entries = tuple(e for e in self._entries if e is not entry)
            if len(entries) != len(self._entries):
                self._entries = entries
                self._cache = {}

    def match(self, topic: str) -> tuple[RouteEntry, ...]:
        """Every entry whose pattern matches ``topic`` (scope and metadata not applied)."""
        cache = self._cache  # read the cache before the entries: see module docstring
        found = cache.get(topic)
        if found is None:
            found = tuple(e for e in self._entries if topic_matches(e.pattern, topic))
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[topic] = found
        return found

    def route(self, message: Message) -> None:
        """Offer ``message`` to every matching entry whose scope and metadata allow it."""
        for entry in self.match(message.topic):
            if scope_allows(entry.crew_id, message) and metadata_allows(entry.metadata_match, message):
                entry.offer(message)

    def count(self, predicate: Callable[[RouteEntry], bool] | None = None) -> int:
        entries = self._entries
        return len(entries) if predicate is None else sum(1 for e in entries if predicate(e))
