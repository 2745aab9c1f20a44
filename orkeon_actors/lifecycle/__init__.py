"""Crew sleep and wake (spec §7): the ports and the supervisor.

The SQLite adapters of the ports (``SqliteCrewStateStore``, ``DurableWaitScheduler``)
are not part of this facade: a durable runtime builds them (``CrewSupervisor`` over a
``Runtime.start(store=...)``); import them from their modules to use them directly."""

from orkeon_actors.lifecycle.activation import SnapshotActivator
from orkeon_actors.lifecycle.idle import CrewIdleDetector
from orkeon_actors.lifecycle.metrics import LifecycleStats, WakeTrigger
from orkeon_actors.lifecycle.ports import (
    CrewActivator,
    CrewLifecycleManager,
    CrewStateStore,
    IdleDetector,
    LifecycleState,
    SleepReason,
    WaitScheduler,
)
from orkeon_actors.lifecycle.supervisor import CrewBlueprint, CrewFactory, CrewSupervisor

__all__ = [
    "CrewActivator",
    "CrewBlueprint",
    "CrewFactory",
    "CrewIdleDetector",
    "CrewLifecycleManager",
    "CrewStateStore",
    "CrewSupervisor",
    "IdleDetector",
    "LifecycleState",
    "LifecycleStats",
    "SleepReason",
    "SnapshotActivator",
    "WaitScheduler",
    "WakeTrigger",
]
