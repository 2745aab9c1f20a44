"""``DurableBindings``: ``event.subscribe`` bindings of crews managed by a
:class:`~orkeon_actors.lifecycle.CrewSupervisor`, delivered whether the crew is active,
asleep, or asleep in a store a restarted process just opened (spec §7, §13.3).

A crew started without a supervisor dispatches its bindings itself
(``CrewActor.on_event``: the matching message is handed to ``deliver_to`` as is). A
supervised crew may have no actor and no subscription when a message arrives, so its
bindings are held here instead, by the hub: every topic message matching one is
**posted** to its ``deliver_to`` mailbox by the hub's system client, in the publisher's
thread (so in publish order). The post reaches the live mailbox of an active crew; for
a sleeping crew it is kept durably and wakes the crew like any post (spec §7.3),
including a crew that was snapshotting or waking when it arrived (the supervisor keeps
such triggers and delivers them in order). The agent receives it as mail whose metadata
says where it came from: ``bound_topic`` (the original topic), ``bound_message_id``,
``bound_source_crew_id``, plus the original metadata; the payload is the original's.

Bindings are recorded in the store (table ``config_bindings``, created on first use) by
the crew's factory at every spawn and wake, and read back when the listener starts, so
after a restart a sleeping crew's bindings hold before its first wake. A binding whose
mailbox is no longer registered (its crew finished) is forgotten.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import ClassVar

import apsw
from loguru import logger

from orkeon_actors.crew.crew_actor import EventBinding
from orkeon_actors.errors import EventHubError
from orkeon_actors.hub.routing import scope_allows, topic_matches
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.store.durable_hub import SqliteEventHub

__all__ = ["DurableBindings"]

_CREATE = """
CREATE TABLE IF NOT EXISTS config_bindings (
    crew_id    TEXT NOT NULL,
    topic      TEXT NOT NULL,
    deliver_to TEXT NOT NULL,
    PRIMARY KEY (crew_id, topic, deliver_to)
)
"""


class DurableBindings:
    """The listener of one durable hub (see the module docstring). Use
    :meth:`for_hub` to get the one instance of a hub."""

    _instances: ClassVar[weakref.WeakValueDictionary[int, DurableBindings]] = weakref.WeakValueDictionary()
    _instances_lock = threading.Lock()

    def __init__(self, hub: SqliteEventHub) -> None:
        self.hub = hub
        self._lock = threading.Lock()
        self._bindings: dict[CrewId, tuple[EventBinding, ...]] = {}
        self._view: tuple[tuple[CrewId, EventBinding], ...] = ()
        hub.writer.execute(lambda conn: conn.execute(_CREATE))
        for crew, topic, deliver_to in hub.readers.query("SELECT crew_id, topic, deliver_to FROM config_bindings"):
            binding = EventBinding(str(topic), MailboxAddress.parse(str(deliver_to)))
            crew_id = CrewId(str(crew))
            self._bindings[crew_id] = (*self._bindings.get(crew_id, ()), binding)
        self._refresh()
        hub.dispatch_listeners.append(self._on_dispatch)

    @classmethod
    def for_hub(cls, hub: SqliteEventHub) -> DurableBindings:
        """The listener of ``hub`` (created on first use)."""
        with cls._instances_lock:
            found = cls._instances.get(id(hub))
            if found is None or found.hub is not hub:
                found = cls(hub)
                cls._instances[id(hub)] = found
            return found

    def _refresh(self) -> None:
        self._view = tuple((crew, b) for crew, bindings in self._bindings.items() for b in bindings)

    def record(self, crew_id: CrewId, bindings: Sequence[EventBinding]) -> None:
        """Crew ``crew_id`` has ``bindings`` (replacing what it had), durably."""
        rows = [(str(crew_id), b.topic, str(b.deliver_to)) for b in bindings]
        with self._lock:
            if self._bindings.get(crew_id, ()) == tuple(bindings):
                return
            self._bindings[crew_id] = tuple(bindings)
            if not bindings:
                del self._bindings[crew_id]
            self._refresh()

        def work(conn: apsw.Connection) -> None:
            conn.execute("DELETE FROM config_bindings WHERE crew_id = ?", (str(crew_id),))
            conn.executemany("INSERT INTO config_bindings VALUES (?, ?, ?)", rows)

        self.hub.writer.execute(work)

    def _forget(self, crew_id: CrewId) -> None:
        with self._lock:
            self._bindings.pop(crew_id, None)
            self._refresh()
        try:
            self.hub.writer.post(
                lambda conn: conn.execute("DELETE FROM config_bindings WHERE crew_id = ?", (str(crew_id),))
            )
        except EventHubError as exc:
            logger.debug("bindings of finished crew {} not forgotten durably: {}", crew_id, exc)

    def _on_dispatch(self, message: Message) -> None:
        view = self._view
        if not view or message.topic.startswith("_system."):
            return
        for crew_id, binding in view:
            if not topic_matches(binding.topic, message.topic) or not scope_allows(crew_id, message):
                continue
            address = binding.deliver_to
            if not self.hub.is_registered(address):
                self._forget(crew_id)  # the crew finished: its mailboxes are gone
                continue
            metadata = {
                **dict(message.metadata),
                "bound_topic": message.topic,
                "bound_message_id": str(message.id),
                "bound_source_crew_id": str(message.source_crew_id),
            }
            try:
                self.hub.system.post(address, message.payload, metadata=metadata)
            except EventHubError as exc:
                logger.error(
                    "binding {} -> {} of sleeping crew {}: {} not posted: {}",
                    binding.topic,
                    address,
                    crew_id,
                    message.id,
                    exc,
                )
