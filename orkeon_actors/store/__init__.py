"""The durable store: the EventHub on SQLite (apsw, WAL, one writer actor).

``Runtime.start(store="state.db")`` opens a :class:`SqliteEventHub`; what it promises is
stated in ``docs/store.md`` and in the docstrings of the modules here.

The names below are imported on first use, so that a tool reading one module of the
store (``orkeon message sent`` reads the sent history alone) does not load the whole
durable hub first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orkeon_actors.lazy import lazy_attributes

if TYPE_CHECKING:
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

_DEFINED_IN: dict[str, str] = {
    "Durability": ".config",
    "PurgePolicy": ".config",
    "StoreConfig": ".config",
    "SqliteEventHub": ".durable_hub",
    "PurgeReport": ".purge",
    "CrewState": ".records",
    "OutboxRecord": ".records",
    "OutboxState": ".records",
    "PendingWaitKind": ".records",
    "PendingWaitRecord": ".records",
    "SnapshotRecord": ".records",
    "SCHEMA_VERSION": ".schema",
    "UnitOfWork": ".unit_of_work",
    "WriterStats": ".writer",
}


__getattr__ = lazy_attributes(__name__, _DEFINED_IN)


def __dir__() -> list[str]:
    return sorted(__all__)


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
