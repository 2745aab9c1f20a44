"""The lifecycle ports of spec §3.3, as protocols, and the values they exchange.

* :class:`CrewLifecycleManager` -- the facade: ``sleep`` and ``wake`` a crew;
* :class:`CrewStateStore` -- raw snapshot persistence (no business logic);
* :class:`CrewActivator` -- recompose a crew from its snapshot and deliver a trigger;
* :class:`IdleDetector` -- ``touch`` on activity, a callback when a crew stays idle;
* :class:`WaitScheduler` -- durable timers for the finite waits of sleeping crews.

And what the supervisor needs from a durable store beyond §3.3 (the adapter implements
them, so ``lifecycle`` holds no SQL and imports no adapter):

* :class:`WakeIndex` -- what wakes a sleeping crew (its topic waits and cursors, its
  reply waits, kept mail) and the topic events kept for its cursors;
* :class:`ExpiryIndex` -- the finite waits of sleeping crews, by expiry;
* :class:`LifecycleBackend` -- a durable hub with its state store and indexes, as a
  durable runtime provides them (:class:`LifecycleHost`).

The implementations: :class:`~orkeon_actors.lifecycle.supervisor.CrewSupervisor`
(the manager), :class:`~orkeon_actors.store.crew_states.SqliteCrewStateStore`,
:class:`~orkeon_actors.lifecycle.activation.SnapshotActivator`,
:class:`~orkeon_actors.lifecycle.idle.CrewIdleDetector` and
:class:`~orkeon_actors.lifecycle.wait_scheduler.DurableWaitScheduler` (the last three
composed by the supervisor, on its thread).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs

from orkeon_actors.crew.handover import CursorFilter
from orkeon_actors.crew.snapshot import CrewOutcome, CrewSnapshot
from orkeon_actors.hub.port import DurableEventHub
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.model.ids import CorrelationId, CrewId
from orkeon_actors.model.message import FrozenMap, Message

__all__ = [
    "CrewActivator",
    "ExpiryIndex",
    "KeptEvents",
    "LifecycleBackend",
    "LifecycleHost",
    "StoredState",
    "WakeIndex",
    "CrewLifecycleManager",
    "CrewStateStore",
    "DurableCrewStateStore",
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


class StoredState(enum.Enum):
    """What the store holds of a crew (``CrewStateStore.stored_state``)."""

    ASLEEP = "Asleep"
    FAILED = "Failed"


class DurableCrewStateStore(CrewStateStore, Protocol):
    """The supervisor's non-blocking use of a :class:`CrewStateStore`: every write is
    queued on the store's writer, its callback runs on the writer's thread after the
    commit (or with the error: nothing written)."""

    def save_async(
        self,
        crew_id: CrewId,
        snapshot: CrewSnapshot,
        processed: Sequence[str],
        on_saved: Callable[[], None],
        on_error: Callable[[BaseException], None],
        *,
        consumed: Sequence[tuple[str, str]] = (),
        kept_upto: int = 0,
        reflected: Sequence[str] = (),
        checkpoint: bool = False,
    ) -> None:
        """The snapshot (state ``Asleep``; ``Active`` for a ``checkpoint``, after which
        the crew goes on running), its waits, the ``processed`` trigger ids, the
        acknowledgement of the ``consumed`` mailbox rows it reflects and the deletion of
        the kept cursor events up to ``kept_upto`` and of those of the topic messages in
        ``reflected``, in one transaction."""
        ...

    def mark_active_async(self, crew_id: CrewId) -> None:
        """Commit that the woken ``crew_id`` is ``Active`` again (its snapshot row's
        state, stamped now), without waiting: what a read-only view of the store shows
        for a running crew. Ordered with the crew's other writes; a failure is logged
        (the crew runs on; the view shows the state committed before)."""
        ...

    def delete_async(
        self, crew_id: CrewId, consumed: Sequence[tuple[str, str]] = (), on_deleted: Callable[[], None] | None = None
    ) -> None:
        """A finished crew's deletion with the acknowledgement of ``consumed``."""
        ...

    def stored_state(self, crew_id: CrewId) -> StoredState | None:
        """What the store holds of ``crew_id`` (``None``: nothing)."""
        ...

    def is_processed(self, message_id: str, crew_id: CrewId) -> bool:
        """Whether ``crew_id`` committed the processing of ``message_id``."""
        ...

    def load_many(self, crew_ids: Sequence[CrewId]) -> Mapping[CrewId, str]:
        """The snapshot texts of those of ``crew_ids`` that have one, read at once (a
        batch of expiries); :func:`~orkeon_actors.crew.snapshot.from_json` decodes each."""
        ...


@attrs.frozen
class KeptEvents:
    """The topic events kept for a sleeping crew's cursors, oldest first, each once."""

    messages: tuple[Message, ...]
    missed: Mapping[CursorFilter, int]
    """Drops per cursor while it slept (beyond the store's bound)."""
    upto: int
    """The store's mark of the last one: deleted by the crew's next snapshot."""


class WakeIndex(Protocol):
    """What wakes a sleeping crew, as a durable store indexes it, and the topic events
    it keeps for sleeping cursors. Reads run on the caller's thread; writes are queued
    on the store's writer, in order with every other write."""

    def topic_patterns(self) -> Mapping[str, int]:
        """Per topic pattern, how many sleeping crews wait on it or have a cursor on it."""
        ...

    def asleep_count(self) -> int: ...

    def has_pending_waits(self, crew_id: CrewId) -> bool: ...

    def crews_to_wake_at_boot(self) -> list[CrewId]:
        """Crews with kept mail, or with topic events kept for a parked wait's cursor
        (published while no supervisor ran), in id order."""
        ...

    def topic_waits(self, patterns: Sequence[str]) -> list[tuple[CrewId, str, FrozenMap | None]]:
        """The parked topic waits on ``patterns``: ``(crew, pattern, metadata_match)``."""
        ...

    def sleeping_cursors(self, patterns: Sequence[str]) -> list[tuple[CrewId, str, str, FrozenMap]]:
        """The cursors of sleeping crews on ``patterns``: ``(crew, key, pattern,
        metadata_match)`` (``key``: the store's, for :meth:`keep_for_sleepers`)."""
        ...

    def waits_on_reply(self, crew_id: CrewId, correlation_id: CorrelationId | None) -> bool: ...

    def cursor_key(self, cursor: CursorFilter) -> str:
        """The store's key of a cursor."""
        ...

    def keep_event(self, crew_id: CrewId, keys: Sequence[str], message: Message) -> None:
        """Queue the keeping of ``message`` for the crew's cursors ``keys`` (a failure is
        logged: the message was published already)."""
        ...

    def keep_for_sleepers(
        self, keys: Mapping[CrewId, list[str]], message: Message, skip: Callable[[CrewId], bool]
    ) -> Waiter[None]:
        """Queue the keeping of ``message`` for each crew's cursors ``keys``, except the
        crews ``skip`` names when the write runs (on the writer's thread); the waiter
        settles at the commit."""
        ...

    def load_kept(
        self,
        crew_id: CrewId,
        after_read: Callable[[], None],
        on_loaded: Callable[[KeptEvents], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        """Queue the read of the events kept for ``crew_id``, in order with the
        keeping writes: ``after_read`` runs on the writer's thread right after it (before
        any later write), then ``on_loaded`` after the commit."""
        ...


class ExpiryIndex(Protocol):
    """The finite waits of sleeping crews, by expiry (times as the index's sortable
    text, :meth:`time_key`)."""

    def time_key(self, at: datetime) -> str: ...

    def window(self, after: tuple[str, str], upto: str, limit: int) -> list[tuple[str, str, str]]:
        """At most ``limit`` ``(expires_at, wait_id, crew_id)`` after ``after`` and up
        to ``upto``, in that order."""
        ...

    def still_indexed(self, wait_ids: Sequence[str]) -> set[str]:
        """Which of ``wait_ids`` are still indexed (their crew did not wake meanwhile)."""
        ...


OutcomeCallback = Callable[[CrewOutcome], None]
"""Told a finished crew's outcome (see :meth:`OutcomeStore.when_finished`)."""


class OutcomeStore(Protocol):
    """The durable outcomes of finished crews (status, result, failure, final state),
    kept for their retention across restarts, and their watchers."""

    def record(self, crew_id: CrewId, outcome: CrewOutcome) -> None:
        """Keep ``outcome`` durably; once committed, call every watcher of the crew."""
        ...

    def load(self, crew_id: CrewId) -> CrewOutcome | None:
        """The kept outcome of ``crew_id``, ``None`` if there is none (or it was purged)."""
        ...

    def forget(self, crew_id: CrewId) -> None:
        """Drop the kept outcome (the crew id is used again)."""
        ...

    def when_finished(self, crew_id: CrewId, callback: OutcomeCallback) -> Callable[[], None]:
        """Call ``callback(outcome)`` once the outcome is durable (at once if it is);
        returns a function withdrawing it."""
        ...


class LifecycleBackend(Protocol):
    """A durable hub with the stores the lifecycle supervisor runs on."""

    @property
    def outcomes(self) -> OutcomeStore: ...

    @property
    def hub(self) -> DurableEventHub: ...

    @property
    def states(self) -> DurableCrewStateStore: ...

    @property
    def wakes(self) -> WakeIndex: ...

    @property
    def expiries(self) -> ExpiryIndex: ...


class LifecycleHost(Protocol):
    """What the supervisor is started on (a durable ``Runtime``)."""

    supervisors: list[Any]
    """The supervisors started on it: each adds itself at start and leaves at stop
    (what observers such as the Studio enumerate)."""

    def lifecycle_backend(self) -> LifecycleBackend:
        """The backend; ``InvalidArgumentError`` for a runtime that is not durable."""
        ...


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
