"""The purge of spec §11.4, run on the runtime's scheduler and ``Clock``.

While the store holds anything a purge may one day delete (a crew snapshot that is not
``Active``, ``processed_messages`` rows, dispatched or failed outbox rows), the purger
keeps one timer on the runtime's scheduler and every ``PurgePolicy.interval`` hands a
purge transaction to the writer (it never blocks the scheduler thread). A store with
nothing of the kind has no purge timer at all. What a purge deletes, measured on the
runtime's clock (a ``VirtualClock`` makes it deterministic):

* ``Completed`` crews: their snapshot, pending waits and ``processed_messages`` rows
  (a unit of work completing a crew already deletes it at once; this catches the rest);
* ``Failed`` crews whose snapshot is older than ``failed_retention`` (default 7 days);
* ``Asleep`` crews with no pending wait left (orphans) whose snapshot is older than
  ``orphan_ttl``; an asleep crew with pending waits is always kept;
* ``processed_messages`` of crews without a snapshot, older than ``processed_ttl``
  (rows of a crew with a snapshot live exactly as long as the snapshot);
* ``Dispatched`` outbox rows older than ``dispatched_retention`` and ``Failed`` ones
  older than ``failed_retention``. ``Pending`` rows are never purged;
* outcomes of crews that completed more than ``outcome_retention`` ago, and of crews
  that failed more than ``failed_retention`` ago.

``purge_now()`` runs the same transaction at once and reports what it deleted.
"""

from __future__ import annotations

import threading
from datetime import datetime

import apsw
import attrs
from loguru import logger

from orkeon_actors.hub.scheduler import Scheduler, TimerHandle
from orkeon_actors.model.clock import Clock
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.config import PurgePolicy
from orkeon_actors.store.unit_of_work import delete_crew
from orkeon_actors.store.writer import StoreWriter

__all__ = ["PurgeReport", "Purger", "purge"]


@attrs.frozen
class PurgeReport:
    """What one purge deleted."""

    completed_crews: int = 0
    failed_crews: int = 0
    orphan_crews: int = 0
    pending_waits: int = 0
    processed_messages: int = 0
    outbox_rows: int = 0
    outcomes: int = 0

    @property
    def total(self) -> int:
        return (
            self.completed_crews
            + self.failed_crews
            + self.orphan_crews
            + self.pending_waits
            + self.processed_messages
            + self.outbox_rows
            + self.outcomes
        )


_MORE = """
SELECT EXISTS (SELECT 1 FROM crew_snapshots WHERE state != 'Active')
    OR EXISTS (SELECT 1 FROM processed_messages)
    OR EXISTS (SELECT 1 FROM outbox WHERE state != 'Pending')
    OR EXISTS (SELECT 1 FROM crew_outcomes)
"""


def purgeable_rows_exist(conn: apsw.Connection) -> bool:
    """Whether the store holds rows a later purge may delete."""
    row = conn.execute(_MORE).fetchone()
    return bool(row is not None and row[0])


class Purger:
    """Schedules the purge while there may be something to purge; see the module
    docstring. ``arm()`` after writing purgeable rows; ``stop()`` cancels it."""

    def __init__(self, writer: StoreWriter, clock: Clock, scheduler: Scheduler, policy: PurgePolicy) -> None:
        self._writer = writer
        self._clock = clock
        self._scheduler = scheduler
        self.policy = policy
        self._lock = threading.Lock()
        self._stopped = False
        self._timer: TimerHandle | None = None
        self.runs = 0
        self.last_report: PurgeReport | None = None

    @property
    def armed(self) -> bool:
        """Whether a purge is scheduled."""
        return self._timer is not None

    def arm(self) -> None:
        """Make sure a purge is scheduled (at most one is). Thread-safe, non-blocking."""
        with self._lock:
            if self._stopped or self._timer is not None:
                return
            self._timer = self._scheduler.schedule_in(self.policy.interval.total_seconds(), self._tick)

    def _tick(self) -> None:
        """On the scheduler thread: hand the purge to the writer."""
        with self._lock:
            self._timer = None
            if self._stopped:
                return
        try:
            self._writer.post(self._work, after_commit=self._done)
        except Exception:
            logger.opt(exception=True).debug("purge skipped: the store is closing")

    def _done(self, outcome: tuple[PurgeReport, bool]) -> None:
        report, more = outcome
        if more:
            self.arm()  # before counting the run: whoever waits on ``runs`` sees the next timer
        self.last_report = report
        self.runs += 1
        if report.total:
            logger.info("store purge deleted {}", report)

    def purge_now(self) -> PurgeReport:
        """Run a purge now and block until it committed."""
        outcome = self._writer.execute(self._work)
        self._done(outcome)
        return outcome[0]

    def _work(self, conn: apsw.Connection) -> tuple[PurgeReport, bool]:
        return purge(conn, self._clock.now(), self.policy)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()


def purge(conn: apsw.Connection, now: datetime, policy: PurgePolicy) -> tuple[PurgeReport, bool]:
    """Delete, inside the caller's transaction, what ``policy`` lets go at ``now`` (see
    the module docstring); returns the report and whether purgeable rows remain.
    ``orkeon store PATH purge --dry-run`` runs it and rolls back."""

    def crews(where: str, *params: str) -> list[str]:
        return [str(row[0]) for row in conn.execute(f"SELECT crew_id FROM crew_snapshots WHERE {where}", params)]

    completed = crews("state = 'Completed'")
    failed = crews("state = 'Failed' AND snapshot_at < ?", format_time(now - policy.failed_retention))
    orphans = crews(
        "state = 'Asleep' AND snapshot_at < ? AND NOT EXISTS "
        "(SELECT 1 FROM pending_waits w WHERE w.crew_id = crew_snapshots.crew_id)",
        format_time(now - policy.orphan_ttl),
    )
    waits = processed = 0
    for crew_id in (*completed, *failed, *orphans):
        crew_waits, crew_processed = delete_crew(conn, crew_id)
        waits += crew_waits
        processed += crew_processed
    conn.execute(
        "DELETE FROM processed_messages WHERE processed_at < ? AND crew_id NOT IN (SELECT crew_id FROM crew_snapshots)",
        (format_time(now - policy.processed_ttl),),
    )
    processed += conn.changes()
    conn.execute(
        "DELETE FROM mailbox_marks WHERE processed_at < ? AND crew_id NOT IN (SELECT crew_id FROM crew_snapshots)",
        (format_time(now - policy.processed_ttl),),
    )
    processed += conn.changes()
    conn.execute(
        "DELETE FROM outbox WHERE state = 'Dispatched' AND dispatched_at < ?",
        (format_time(now - policy.dispatched_retention),),
    )
    outbox_rows = conn.changes()
    conn.execute(
        "DELETE FROM outbox WHERE state = 'Failed' AND created_at < ?",
        (format_time(now - policy.failed_retention),),
    )
    outbox_rows += conn.changes()
    conn.execute(
        "DELETE FROM crew_outcomes WHERE (status = 'Completed' AND finished_at < ?) "
        "OR (status = 'Failed' AND finished_at < ?)",
        (format_time(now - policy.outcome_retention), format_time(now - policy.failed_retention)),
    )
    outcomes = conn.changes()
    report = PurgeReport(len(completed), len(failed), len(orphans), waits, processed, outbox_rows, outcomes)
    return report, purgeable_rows_exist(conn)
