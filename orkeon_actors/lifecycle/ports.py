"""The lifecycle ports of spec §3.3, as protocols, and the values they exchange.

* :class:`CrewLifecycleManager` -- the facade: ``sleep`` and ``wake`` a crew;
* :class:`CrewStateStore` -- raw snapshot persistence (no business logic);
* :class:`CrewActivator` -- recompose a crew from its snapshot and deliver a trigger;
* :class:`IdleDetector` -- ``touch`` on activity, a callback when a crew stays idle;
* :class:`WaitScheduler` -- durable timers for the finite waits of sleeping crews.

The implementations: :class:`~orkeon_actors.lifecycle.supervisor.CrewSupervisor`
(the manager), :class:`~orkeon_actors.lifecycle.state_store.SqliteCrewStateStore`,
:class:`~orkeon_actors.lifecycle.activation.SnapshotActivator`,
:class:`~orkeon_actors.lifecycle.idle.CrewIdleDetector` and
:class:`~orkeon_actors.lifecycle.wait_scheduler.DurableWaitScheduler` (the last three
composed by the supervisor, on its thread).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import datetime
from typing import Protocol, runtime_checkable

from orkeon_actors.crew.snapshot import CrewSnapshot
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

__all__ = [
    "CrewActivator",
    "CrewLifecycleManager",
    "CrewStateStore",
    "IdleDetector",
    "LifecycleState",
    "SleepReason",
    "WaitScheduler",
]


class LifecycleState(enum.Enum):
    """Where a crew is in its lifecycle (spec §7)."""

    ACTIVE = "Active"
    SNAPSHOTTING = "Snapshotting"
    ASLEEP = "Asleep"
    ACTIVATING = "Activating"
    COMPLETED = "Completed"
    FAILED = "Failed"
    UNKNOWN = "Unknown"
    """No such crew: never spawned here and no snapshot in the store."""


class SleepReason(enum.Enum):
    EXPLICIT = "explicit"
    """``sleep(crew_id)`` was called."""
    IDLE = "idle"
    """The crew waited ``idle_timeout`` without activity (spec §7.1)."""
    CAPACITY = "capacity"
    """More crews were active than ``max_active``: least recently used first."""
    SHUTDOWN = "shutdown"
    """``CrewSupervisor.stop()``: every live crew is put to sleep before the stop."""


@runtime_checkable
class CrewLifecycleManager(Protocol):
    def sleep(self, crew_id: CrewId | str, reason: SleepReason = SleepReason.EXPLICIT) -> bool:
        """Passivate the crew; ``True`` once asleep, ``False`` if it could not sleep
        (not waiting for a message, or the snapshot write failed: it stays active)."""
        ...

    def wake(self, crew_id: CrewId | str, trigger: Message | None = None) -> None:
        """Activate a sleeping crew and deliver ``trigger`` to the agent waiting for it."""
        ...


@runtime_checkable
class CrewStateStore(Protocol):
    def save(self, crew_id: CrewId, snapshot: CrewSnapshot) -> None: ...

    def load(self, crew_id: CrewId) -> CrewSnapshot | None: ...

    def delete(self, crew_id: CrewId) -> None: ...


@runtime_checkable
class CrewActivator(Protocol):
    def activate(self, crew_id: CrewId, trigger: Message | None) -> object | None:
        """Recompose ``crew_id`` from its snapshot and deliver ``trigger``; the
        activated crew (a handle of the implementation's), or ``None`` when there is
        nothing to activate (no snapshot, or the trigger was already processed)."""
        ...


@runtime_checkable
class IdleDetector(Protocol):
    def touch(self, crew_id: CrewId) -> None: ...

    def on_idle(self, callback: Callable[[CrewId], None]) -> None: ...


@runtime_checkable
class WaitScheduler(Protocol):
    def schedule(self, crew_id: CrewId, wait_id: str, expires_at: datetime) -> None: ...

    def cancel(self, wait_id: str) -> None: ...
