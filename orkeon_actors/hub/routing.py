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

import threading
from collections.abc import Callable
from typing import Protocol

from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import FrozenMap, Message

__all__ = ["topic_matches", "TopicRouter", "RouteEntry", "scope_allows"]

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
    if not match:
        return True
    metadata = message.metadata
    return all(metadata.get(key) == value for key, value in match.items())


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
        self._cache_bytes = 0

    def add(self, entry: RouteEntry) -> None:
        with self._lock:
            self._entries = (*self._entries, entry)
            self._cache = {}
            self._cache_bytes = 0

    def remove(self, entry: RouteEntry) -> None:
        with self._lock:
            entries = tuple(e for e in self._entries if e is not entry)
            if len(entries) != len(self._entries):
                self._entries = entries
                self._cache = {}
                self._cache_bytes = 0

    def match(self, topic: str) -> tuple[RouteEntry, ...]:
        """Every entry whose pattern matches ``topic`` (scope and metadata not applied)."""
        cache = self._cache  # read the cache before the entries: see module docstring
        found = cache.get(topic)
        if found is None:
            found = tuple(e for e in self._entries if topic_matches(e.pattern, topic))
            size = len(topic) + 8 * len(found) + _CACHE_ENTRY_OVERHEAD
            if self._cache_bytes + size > _CACHE_BYTES:
                cache.clear()
                self._cache_bytes = 0
            cache[topic] = found
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
            self._entries = ()
            self._cache = {}
            self._cache_bytes = 0

    def count(self, predicate: Callable[[RouteEntry], bool] | None = None) -> int:
        entries = self._entries
        return len(entries) if predicate is None else sum(1 for e in entries if predicate(e))
