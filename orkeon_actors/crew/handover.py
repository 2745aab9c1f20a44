"""``Handover``: the topic events a crew must not miss while its cursors are closed
(Orkeon EventHub & Crew Lifecycle specification, §5.2, §7.3).

Between the moment a crew takes its sleep snapshot (or is woken) and the moment its
restored cursors are open again, nothing holds the topic messages its cursors would have
received. Its owner keeps them in a :class:`Handover`: every message matching one of the
crew's cursor filters, once each, in the order heard of, with the events kept durably in
the store merged in; at the wake it tells them to the crew (``CatchUp``), whose cursors
each take :func:`for_cursor` of them.

Every decision "does this message belong to this cursor" is
:func:`~orkeon_actors.hub.routing.cursor_matches`: keeping, filtering, a crew's offers
and a sleeping wait's trigger read the same predicate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from orkeon_actors.crew.snapshot import CrewSnapshot
from orkeon_actors.crew.state import OnTopic
from orkeon_actors.hub.routing import cursor_matches
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import FrozenMap, Message

__all__ = ["CursorFilter", "Handover", "for_cursor", "matching_filters", "snapshot_cursors"]

CursorFilter = tuple[str, FrozenMap | None]
"""A cursor's key: its topic pattern and its metadata match."""


def snapshot_cursors(snapshot: CrewSnapshot) -> list[CursorFilter]:
    """Every ``(topic, metadata_match)`` a crew's agents read, as its ``snapshot`` holds
    them: their cursors and their parked topic waits, each once (an empty match as
    ``None``)."""
    keys = [(c.topic, c.metadata_match or None) for a in snapshot.agents for c in a.cursors]
    keys.extend(
        (w.kind.topic, w.kind.metadata_match or None) for w in snapshot.pending_waits if isinstance(w.kind, OnTopic)
    )
    return list(dict.fromkeys(keys))


def matching_filters(filters: Iterable[CursorFilter], crew_id: CrewId, message: Message) -> list[CursorFilter]:
    """The filters of ``filters`` (a crew's cursors) that receive ``message``."""
    return [(topic, match) for topic, match in filters if cursor_matches(topic, match, crew_id, message)]


def for_cursor(cursor: CursorFilter, crew_id: CrewId, messages: Iterable[Message]) -> list[Message]:
    """The messages of ``messages`` cursor ``cursor`` of crew ``crew_id`` receives, in order."""
    topic, match = cursor
    return [m for m in messages if cursor_matches(topic, match, crew_id, m)]


class Handover:
    """The topic messages kept for one crew whose cursors are closed while it snapshots
    or activates: those matching any of its cursor ``filters``, once each (by id), in
    the order its owner heard of them, with the events read from the store merged in
    (see :meth:`merge`). Not thread-safe: one owner (the supervisor's actor) uses it."""

    __slots__ = ("crew_id", "filters", "ids", "messages")

    def __init__(self, crew_id: CrewId, filters: Sequence[CursorFilter]) -> None:
        self.crew_id = crew_id
        self.filters: tuple[CursorFilter, ...] = tuple(dict.fromkeys(filters))
        self.ids: set[str] = set()
        self.messages: list[Message] = []

    @property
    def patterns(self) -> list[str]:
        """The topic patterns of its filters, sorted, once each."""
        return sorted({topic for topic, _ in self.filters})

    def keep(self, message: Message) -> bool:
        """Keep ``message`` if it matches a cursor and is not kept yet; whether it was."""
        key = str(message.id)
        if key in self.ids or not matching_filters(self.filters, self.crew_id, message):
            return False
        self.ids.add(key)
        self.messages.append(message)
        return True

    def holds(self, message: Message) -> bool:
        """Whether ``message`` is kept (or was merged in)."""
        return str(message.id) in self.ids

    def merge(self, stored: Sequence[Message]) -> None:
        """Merge the events kept for the crew in the store (``stored``, in commit order:
        every one was routed before the crew went live, so before its cursors reopened).
        Each one not heard of yet goes right after the stored event before it that was
        (the first ones: in front, kept while it slept), so the handover keeps both the
        store's order and the order heard of; a reopened cursor's catch-up relies on
        what its new subscription holds being the handover's tail."""
        front: list[Message] = []
        after: dict[str, list[Message]] = {}  # id of a stored event heard of -> those that follow it
        following = front
        for message in stored:
            key = str(message.id)
            if key in self.ids:
                following = after.setdefault(key, [])
            else:
                self.ids.add(key)
                following.append(message)
        if not front and not any(after.values()):
            return
        merged = front
        for message in self.messages:  # one pass: up to 10,000 kept events per cursor
            merged.append(message)
            merged.extend(after.get(str(message.id), ()))
        self.messages = merged

    def without(self, held: set[object]) -> list[Message]:
        """The kept messages whose id is not in ``held`` (those a snapshot's cursors
        already hold), in order."""
        return [m for m in self.messages if m.id not in held]
