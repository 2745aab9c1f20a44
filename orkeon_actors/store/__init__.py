"""The durable store: the EventHub on SQLite (apsw, WAL, one writer actor).

``Runtime.start(store="state.db")`` opens a :class:`SqliteEventHub`; what it promises is
stated in ``docs/store.md`` and in the docstrings of the modules here.
"""

from orkeon_actors.store.config import Durability, PurgePolicy, StoreConfig
from orkeon_actors.store.durable_hub import SqliteEventHub
from orkeon_actors.store.purge import PurgeReport
from orkeon_actors.store.records import (
    CrewState,
    OutboxRecord,
    OutboxState,
    PendingWaitKind,
    PendingWaitRecord,
    SnapshotRecord,
)
from orkeon_actors.store.schema import SCHEMA_VERSION
from orkeon_actors.store.unit_of_work import UnitOfWork
from orkeon_actors.store.writer import WriterStats

__all__ = [
    "SCHEMA_VERSION",
    "CrewState",
    "Durability",
    "OutboxRecord",
    "OutboxState",
    "PendingWaitKind",
    "PendingWaitRecord",
    "PurgePolicy",
    "PurgeReport",
    "SnapshotRecord",
    "SqliteEventHub",
    "StoreConfig",
    "UnitOfWork",
    "WriterStats",
]
