"""Crew sleep and wake (spec §7): ports, the SQLite state store, the supervisor."""

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
from orkeon_actors.lifecycle.state_store import SqliteCrewStateStore
from orkeon_actors.lifecycle.supervisor import CrewBlueprint, CrewFactory, CrewSupervisor
from orkeon_actors.lifecycle.wait_scheduler import DurableWaitScheduler

__all__ = [
    "CrewActivator",
    "CrewBlueprint",
    "CrewFactory",
    "CrewIdleDetector",
    "CrewLifecycleManager",
    "CrewStateStore",
    "DurableWaitScheduler",
    "CrewSupervisor",
    "IdleDetector",
    "LifecycleState",
    "LifecycleStats",
    "SleepReason",
    "SnapshotActivator",
    "SqliteCrewStateStore",
    "WaitScheduler",
    "WakeTrigger",
]
