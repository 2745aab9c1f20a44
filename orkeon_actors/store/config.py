"""How a durable store is opened: file, durability, locking, purge policy."""

from __future__ import annotations

import enum
import os
from datetime import timedelta

import attrs

from orkeon_actors.errors import InvalidArgumentError

__all__ = ["Durability", "PurgePolicy", "StoreConfig"]


class Durability(enum.Enum):
    """What an acknowledged write survives (SQLite ``PRAGMA synchronous`` in WAL mode).

    * ``FULL`` (default): the WAL is fsynced before a commit is acknowledged. An
      acknowledged write survives a process crash *and* an OS crash or power loss (as
      far as the disk honours flushes).
    * ``NORMAL``: the WAL is fsynced only at checkpoints. An acknowledged write survives
      a process crash (SIGKILL included), but the last transactions before an OS crash
      or power loss may be rolled back. The file is never corrupted either way.
    """

    FULL = "full"
    NORMAL = "normal"

    @classmethod
    def coerce(cls, value: Durability | str) -> Durability:
        if isinstance(value, Durability):
            return value
        if isinstance(value, str):
            try:
                return cls(value.lower())
            except ValueError:
                pass
        raise InvalidArgumentError(f"durability must be 'full' or 'normal', got {value!r}")


def _positive_delta(instance: object, attribute: attrs.Attribute[timedelta], value: timedelta) -> None:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidArgumentError(f"{attribute.name} must be a positive datetime.timedelta, got {value!r}")


@attrs.frozen
class PurgePolicy:
    """Retention of finished crews and their bookkeeping (spec §11.4).

    * a ``Completed`` crew is deleted at once with its pending waits and its
      ``processed_messages`` rows;
    * a ``Failed`` crew is kept ``failed_retention`` (default 7 days) after its last
      snapshot, then deleted the same way;
    * an ``Asleep`` crew is kept while it has pending waits; one with none (an orphan) is
      deleted once its snapshot is older than ``orphan_ttl``;
    * ``processed_messages`` rows live as long as their crew's snapshot; rows of a crew
      that never saved a snapshot are kept ``processed_ttl`` after processing;
    * dispatched outbox rows are kept ``dispatched_retention``; failed ones as long as
      failed crews;
    * the outcome of a finished crew (``crew_outcomes``: status, result, failure, final
      state) is kept ``outcome_retention`` (default 7 days) after it completed, and
      ``failed_retention`` after it failed.

    The purge runs every ``interval`` on the runtime's scheduler, on its ``Clock``.
    """

    failed_retention: timedelta = attrs.field(default=timedelta(days=7), validator=_positive_delta)
    orphan_ttl: timedelta = attrs.field(default=timedelta(days=1), validator=_positive_delta)
    processed_ttl: timedelta = attrs.field(default=timedelta(days=7), validator=_positive_delta)
    dispatched_retention: timedelta = attrs.field(default=timedelta(days=1), validator=_positive_delta)
    interval: timedelta = attrs.field(default=timedelta(hours=1), validator=_positive_delta)
    outcome_retention: timedelta = attrs.field(default=timedelta(days=7), validator=_positive_delta)


def _path(value: str | os.PathLike[str]) -> str:
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if text and text != ":memory:" and not text.startswith("file:"):
            return text
    raise InvalidArgumentError(
        f"store must be the path of a database file (for example 'state.db'), got {value!r}; "
        "use store=None for an in-memory hub"
    )


def _durability(value: Durability | str) -> Durability:
    return Durability.coerce(value)


def _non_negative(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidArgumentError(f"{attribute.name} must be a non-negative number of seconds, got {value!r}")


@attrs.frozen
class StoreConfig:
    """Everything about a durable store. ``Runtime.start(store="state.db")`` is
    ``StoreConfig("state.db")``.

    * ``durability``: see :class:`Durability`.
    * ``lock_timeout``: one runtime owns a store at a time. A second one (another
      process, or this one) raises ``StoreLockedError`` at once when 0 (the default), or
      waits up to this many seconds for the owner to stop. It never corrupts the file and
      never fails later with "database is locked".
    * ``busy_timeout``: how long one statement waits on a lock held by a *foreign* SQLite
      client reading the file (a backup, the ``sqlite3`` shell), in seconds.
    * ``max_batch``: most write requests committed in one transaction (group commit).
    * ``bulk_batch``: most *bulk* write requests in one transaction (every request but
      the urgent ones, which wake sleeping crews): it bounds how long the batch in
      progress holds a wake back (:mod:`orkeon_actors.store.write_queue`).
    * ``registry_cache``: how many durably registered mailbox addresses the writer
      remembers (least recently used first out); the registry itself stays in SQLite,
      so boot time and memory do not grow with the number of sleeping crews.
    * ``checkpoint_pages``: WAL size (pages) past which the background checkpointer
      copies the WAL into the database (see :mod:`orkeon_actors.store.checkpointer`);
      commits never checkpoint themselves. Small (200 pages, 0.8 MB) so that each
      checkpoint's writes delay a concurrent commit's fsync little (docs/store.md).
    * ``sent_history`` (default on): every agent keeps a verifiable record of what it
      sent (docs/history.md). Off, the store keeps no sent index and every coverage
      reads ``unavailable`` (it is never reported complete across the gap).
    """

    path: str = attrs.field(converter=_path)
    durability: Durability = attrs.field(default=Durability.FULL, converter=_durability)
    lock_timeout: float = attrs.field(default=0.0, validator=_non_negative)
    busy_timeout: float = attrs.field(default=5.0, validator=_non_negative)
    max_batch: int = 2048
    bulk_batch: int = 128
    registry_cache: int = 65_536
    checkpoint_pages: int = 200
    purge: PurgePolicy = attrs.field(factory=PurgePolicy)
    sent_history: bool = True

    def __attrs_post_init__(self) -> None:
        if isinstance(self.max_batch, bool) or not isinstance(self.max_batch, int) or self.max_batch < 1:
            raise InvalidArgumentError(f"max_batch must be a positive int, got {self.max_batch!r}")
        if isinstance(self.bulk_batch, bool) or not isinstance(self.bulk_batch, int) or self.bulk_batch < 1:
            raise InvalidArgumentError(f"bulk_batch must be a positive int, got {self.bulk_batch!r}")
        if isinstance(self.registry_cache, bool) or not isinstance(self.registry_cache, int) or self.registry_cache < 1:
            raise InvalidArgumentError(f"registry_cache must be a positive int, got {self.registry_cache!r}")
        pages = self.checkpoint_pages
        if isinstance(pages, bool) or not isinstance(pages, int) or pages < 1:
            raise InvalidArgumentError(f"checkpoint_pages must be a positive int, got {pages!r}")
