"""Outcomes of finished crews: kept durably for their retention, and waited for.

:class:`OutcomeBook` is the supervisor's record of what its finished crews left behind.
When a crew finishes, :meth:`OutcomeBook.record` writes its outcome (status, result,
failure, final state) to the store's ``crew_outcomes`` table and, for a crew that
failed, its final snapshot with state ``Failed`` (kept ``failed_retention`` for audit,
spec §11.4); once that commit is durable every watcher of the crew is called. After a
restart :meth:`OutcomeBook.load` reads the outcome back, until the purge drops it
(``PurgePolicy.outcome_retention`` after completion, ``failed_retention`` after failure).

:meth:`OutcomeBook.when_finished` is the non-blocking primitive: ``callback(outcome)``
runs exactly once, at once (on the calling thread) when the outcome is already durable,
else on the store writer's thread right after the commit. A callback must be short and
must not block (an asyncio facade hands the outcome to its loop with
``loop.call_soon_threadsafe``). It is the SQLite adapter's
:class:`~orkeon_actors.lifecycle.ports.OutcomeStore`.

A failed crew's final snapshot is written only when the supervisor keeps final states
(``finished_memory > 0``); its outcome row is written in every case.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from loguru import logger

from orkeon_actors.crew.snapshot import CrewOutcome, converter
from orkeon_actors.crew.state import CrewFailure, CrewStatus
from orkeon_actors.errors import HubStoppedError, StoreError
from orkeon_actors.lifecycle.ports import OutcomeCallback
from orkeon_actors.model.ids import CrewId
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.crew_states import SqliteCrewStateStore
from orkeon_actors.store.durable_hub import SqliteEventHub
from orkeon_actors.store.outcomes import OutcomeRow, delete_outcome, load_outcome, write_outcome
from orkeon_actors.store.write_queue import crew_key

__all__ = ["OutcomeBook"]


_STATUS = {CrewStatus.COMPLETED: "Completed", CrewStatus.FAILED: "Failed"}


def _to_row(crew_id: CrewId, outcome: CrewOutcome, finished_at: str) -> OutcomeRow:
    failure = None if outcome.failure is None else json.dumps(converter.unstructure(outcome.failure))
    return OutcomeRow(str(crew_id), _STATUS[outcome.status], outcome.result, failure, outcome.final_json, finished_at)


def _from_row(row: OutcomeRow) -> CrewOutcome:
    status = CrewStatus.COMPLETED if row.status == "Completed" else CrewStatus.FAILED
    failure = None if row.failure is None else converter.structure(json.loads(row.failure), CrewFailure)
    return CrewOutcome(status, row.result, failure, row.final_snapshot)


class OutcomeBook:
    """Durable outcomes of one supervisor's crews and the watchers waiting for them.
    Thread-safe."""

    def __init__(self, hub: SqliteEventHub, store: SqliteCrewStateStore) -> None:
        self._hub = hub
        self._store = store
        self._lock = threading.Lock()
        self._watchers: dict[CrewId, list[OutcomeCallback]] = {}
        self._unwritten: dict[CrewId, CrewOutcome] = {}  # recorded, not committed yet: load() sees them

    def record(self, crew_id: CrewId, outcome: CrewOutcome) -> None:
        """Queue the durable record of ``crew_id``'s ``outcome`` (never blocks); its
        watchers are called after the commit. A failed write is logged and the watchers
        still get the outcome (it is known, only not durable)."""
        row = _to_row(crew_id, outcome, format_time(self._hub.clock.now()))
        with self._lock:
            self._unwritten[crew_id] = outcome
        final = outcome.final_snapshot() if outcome.status is CrewStatus.FAILED else None
        try:
            if final is not None:
                self._store.mark_failed_async(crew_id, final)
            self._hub.writer.post(
                lambda conn: write_outcome(conn, row),
                after_commit=lambda _: self._committed(crew_id, outcome),
                on_error=lambda exc: self._unrecorded(crew_id, outcome, exc),
                key=crew_key(str(crew_id)),
            )
        except HubStoppedError as exc:
            self._unrecorded(crew_id, outcome, exc)

    def _committed(self, crew_id: CrewId, outcome: CrewOutcome) -> None:
        self._hub.purger.arm()  # the row is purged after its retention
        self._settle(crew_id, outcome)

    def _unrecorded(self, crew_id: CrewId, outcome: CrewOutcome, exc: BaseException) -> None:
        logger.error("crew {}: its outcome could not be kept in the store: {}", crew_id, exc)
        self._settle(crew_id, outcome)

    def _settle(self, crew_id: CrewId, outcome: CrewOutcome) -> None:
        with self._lock:
            if self._unwritten.get(crew_id) is outcome:
                del self._unwritten[crew_id]
            watchers = self._watchers.pop(crew_id, [])
        for callback in watchers:
            _call(callback, outcome)

    def load(self, crew_id: CrewId) -> CrewOutcome | None:
        """The outcome of ``crew_id`` (durable, or recorded and being written), or
        ``None`` (never finished, or purged)."""
        with self._lock:
            unwritten = self._unwritten.get(crew_id)
        if unwritten is not None:
            return unwritten
        return self._load_durable(crew_id)

    def _load_durable(self, crew_id: CrewId) -> CrewOutcome | None:
        try:
            with self._hub.readers.connection() as conn:
                row = load_outcome(conn, str(crew_id))
        except (HubStoppedError, StoreError):
            return None
        return None if row is None else _from_row(row)

    def forget(self, crew_id: CrewId) -> None:
        """``crew_id`` is used again by a new crew: its old outcome is history."""
        with self._lock:
            self._unwritten.pop(crew_id, None)
        self._hub.writer.post(lambda conn: delete_outcome(conn, str(crew_id)))

    def when_finished(self, crew_id: CrewId, callback: OutcomeCallback) -> Callable[[], None]:
        """Call ``callback(outcome)`` once ``crew_id``'s outcome is durable (at once if
        it already is). Returns a function that withdraws the callback."""
        with self._lock:
            self._watchers.setdefault(crew_id, []).append(callback)
        known = self._load_durable(crew_id)
        if known is not None:
            with self._lock:
                watchers = self._watchers.get(crew_id, [])
                mine = callback in watchers
                if mine:
                    watchers.remove(callback)
            if mine:
                _call(callback, known)

        def withdraw() -> None:
            with self._lock:
                watchers = self._watchers.get(crew_id)
                if watchers is not None and callback in watchers:
                    watchers.remove(callback)
                    if not watchers:
                        del self._watchers[crew_id]

        return withdraw


def _call(callback: OutcomeCallback, outcome: CrewOutcome) -> None:
    try:
        callback(outcome)
    except Exception:  # one broken watcher must not keep the outcome from the others
        logger.opt(exception=True).error("a when_finished callback failed")
