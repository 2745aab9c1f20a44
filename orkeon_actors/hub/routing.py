"""Topic routing: AMQP-style patterns, the reference matcher, and the subscriber index.

Patterns are dot-separated words where ``*`` matches exactly one word and ``#`` zero or
more, so ``orders.*`` matches ``orders.created`` but not ``orders`` or
``orders.eu.created``, and ``orders.#`` matches all three. The same semantics hold on
RabbitMQ, so a pattern means the same thing on every adapter.

:func:`topic_matches` is the reference matcher; :class:`TopicRouter` indexes its entries
(:mod:`orkeon_actors.hub.topic_index`) so that adding, removing and matching do not grow
with the number of entries, and caches matches per topic. A subscriber added before
``publish`` matches is always seen (no lost wake-up).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from orkeon_actors.hub.topic_index import TopicIndex, is_pattern
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import FrozenMap, Message

__all__ = ["topic_matches", "TopicRouter", "RouteEntry", "scope_allows", "metadata_allows", "cursor_matches"]

_CACHE_BYTES = 4 * 1024 * 1024
"""The router's match cache is emptied when the topics it holds pass this many bytes
(with its entry tuples counted at 8 bytes a slot): hostile topics cannot make it grow
without bound. Each hub has its own cache, freed with the hub."""
_CACHE_ENTRY_OVERHEAD = 64


def topic_matches(pattern: str, topic: str) -> bool:
    """True when ``topic`` matches ``pattern`` (``*`` one word, ``#`` zero or more).

    Iterative (a word-level wildcard match with one backtracking point): linear stack,
    ``O(words(pattern) * words(topic))`` time at worst, for any number of words."""
    if "*" not in pattern and "#" not in pattern:
        return pattern == topic
    return _match_words(pattern.split("."), topic.split("."))


def _match_words(pattern: list[str], words: list[str]) -> bool:
    i = j = 0  # the next pattern word, the next topic word
    star = -1  # the pattern index of the last '#' seen
    resume = 0  # the topic index that '#' will absorb up to on the next backtrack
    while j < len(words):
        if i < len(pattern) and pattern[i] == "#":
            star, resume = i, j
            i += 1
        elif i < len(pattern) and (pattern[i] == "*" or pattern[i] == words[j]):
            i += 1
            j += 1
        elif star >= 0:
            resume += 1  # let the last '#' absorb one more word and retry after it
            i, j = star + 1, resume
        else:
            return False
    while i < len(pattern) and pattern[i] == "#":
        i += 1
    return i == len(pattern)


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
    """The subscriber index of one hub (:class:`~orkeon_actors.hub.topic_index.TopicIndex`).
    Thread-safe. Adding, removing and matching cost the same at 100 and at 100,000
    entries; a topic seen before is matched from a cache without the lock.

    Cache contract (no lost wake-up): the cache is only written under the lock, and a
    change drops what it could make stale before it releases the lock: the one topic
    of an exact entry, or the whole cache for a pattern (a new dict: readers of the old
    one finish on it). A ``match`` that starts after ``add`` returned sees the entry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: TopicIndex[RouteEntry] = TopicIndex()
        self._cache: dict[str, tuple[RouteEntry, ...]] = {}
        self._cache_bytes = 0

    def _changed(self, pattern: str) -> None:
        """Under the lock: forget the cached matches ``pattern`` may change."""
        if is_pattern(pattern):
            self._cache = {}
            self._cache_bytes = 0
        else:
            self._cache.pop(pattern, None)

    def add(self, entry: RouteEntry) -> None:
        with self._lock:
            self._index.add(entry, entry.pattern)
            self._changed(entry.pattern)

    def remove(self, entry: RouteEntry) -> None:
        with self._lock:
            if self._index.remove(entry):
                self._changed(entry.pattern)

    def match(self, topic: str) -> tuple[RouteEntry, ...]:
        """Every entry whose pattern matches ``topic`` (scope and metadata not applied)."""
        found = self._cache.get(topic)
        if found is not None:
            return found
        with self._lock:
            found = tuple(self._index.match(topic))
            size = len(topic) + 8 * len(found) + _CACHE_ENTRY_OVERHEAD
            if self._cache_bytes + size > _CACHE_BYTES:
                self._cache = {}
                self._cache_bytes = 0
            self._cache[topic] = found
            self._cache_bytes += size
        return found

    def route(self, message: Message) -> None:
        """Offer ``message`` to every matching entry whose scope and metadata allow it."""
        for entry in self.match(message.topic):
            if scope_allows(entry.crew_id, message) and metadata_allows(entry.metadata_match, message):
                entry.offer(message)

    def clear(self) -> None:
        """Drop every entry and the match cache (the hub stopped)."""
        with self._lock:
            self._index.clear()
            self._cache = {}
            self._cache_bytes = 0

    def count(self, predicate: Callable[[RouteEntry], bool] | None = None) -> int:
        with self._lock:
            if predicate is None:
                return len(self._index)
            entries = self._index.values()
        return sum(1 for e in entries if predicate(e))
