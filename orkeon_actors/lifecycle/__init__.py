"""Crew sleep and wake (spec §7): the ports and the supervisor. The SQLite adapters of
the ports (crew state store, wake and expiry indexes) live in :mod:`orkeon_actors.store`."""

from orkeon_actors.lifecycle.activation import CrewSource, SnapshotActivator
from orkeon_actors.lifecycle.idle import CrewIdleDetector
from orkeon_actors.lifecycle.memory import give_back_memory
from orkeon_actors.lifecycle.metrics import LifecycleStats, WakeTrigger
from orkeon_actors.lifecycle.ports import (
    CrewActivator,
    CrewLifecycleManager,
    CrewStateStore,
    DurableCrewStateStore,
    ExpiryIndex,
    IdleDetector,
    KeptEvents,
    LifecycleBackend,
    LifecycleHost,
    LifecycleState,
    SleepReason,
    StoredState,
    WaitScheduler,
    WakeIndex,
)
from orkeon_actors.lifecycle.supervisor import CrewBlueprint, CrewFactory, CrewSupervisor
from orkeon_actors.lifecycle.wait_scheduler import DurableWaitScheduler

__all__ = [
    "CrewActivator",
    "CrewBlueprint",
    "CrewFactory",
    "CrewSource",
    "give_back_memory",
    "CrewIdleDetector",
    "CrewLifecycleManager",
    "CrewStateStore",
    "DurableCrewStateStore",
    "ExpiryIndex",
    "KeptEvents",
    "LifecycleBackend",
    "LifecycleHost",
    "StoredState",
    "WakeIndex",
    "DurableWaitScheduler",
    "CrewSupervisor",
    "IdleDetector",
    "LifecycleState",
    "LifecycleStats",
    "SleepReason",
    "SnapshotActivator",
    "WaitScheduler",
    "WakeTrigger",
]
