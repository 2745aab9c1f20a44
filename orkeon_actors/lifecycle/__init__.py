"""Crew sleep and wake (spec §7): ports, the SQLite state store, the supervisor."""

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

__all__ = [
    "CrewActivator",
    "CrewBlueprint",
    "CrewFactory",
    "CrewLifecycleManager",
    "CrewStateStore",
    "CrewSupervisor",
    "IdleDetector",
    "LifecycleState",
    "LifecycleStats",
    "SleepReason",
    "SqliteCrewStateStore",
    "WaitScheduler",
    "WakeTrigger",
]
