"""The purge of §11.4 on a VirtualClock: it runs on the runtime's scheduler."""

from __future__ import annotations

from datetime import timedelta

import pytest

import orkeon_actors as ok
from orkeon_actors.store import CrewState, PendingWaitKind, PendingWaitRecord, PurgePolicy, SqliteEventHub, StoreConfig
from orkeon_actors.testing import wait_until
from tests.store.conftest import Opener, durable

DAY = 24 * 3600.0


@pytest.fixture
def clock() -> ok.VirtualClock:
    return ok.VirtualClock()


def _crew(hub: SqliteEventHub, crew: str, state: CrewState, *, consuming: ok.Message | None = None) -> None:
    with hub.unit_of_work(crew, consuming=consuming) as uow:
        uow.save_snapshot({"crew": crew}, mode="sequential", schema_version=1, state=state)


def _advance(clock: ok.VirtualClock, hub: SqliteEventHub, seconds: float) -> None:
    """Move time and wait until the purge the scheduler fired has committed."""
    runs = hub.purger.runs
    clock.advance(seconds)
    wait_until(lambda: hub.purger.runs > runs, what="the scheduled purge to run")


def test_no_purge_timer_while_there_is_nothing_to_purge(open_store: Opener, clock: ok.VirtualClock) -> None:
    rt = open_store(clock=clock)
    hub = durable(rt)
    hub.register_mailbox("agent://a/b")
    hub.bind("x", "y").post("agent://a/b", 1)
    assert not hub.purger.armed and rt.scheduler.pending_count() == 0
    _crew(hub, "c", CrewState.ACTIVE)
    assert hub.purger.armed


def test_a_completed_crew_is_deleted_at_once_with_its_waits_and_processed_rows(
    open_store: Opener, clock: ok.VirtualClock
) -> None:
    rt = open_store(clock=clock)
    hub = durable(rt)
    hub.register_mailbox("agent://c/a")
    message = hub.bind("x", "y").post("agent://c/a", 1)
    with hub.unit_of_work("c") as uow:
        uow.save_snapshot({}, mode="graph", schema_version=1, state=CrewState.ASLEEP)
        uow.put_pending_wait(
            PendingWaitRecord("w", "c", PendingWaitKind.ON_MAILBOX, clock.now(), target_mailbox="agent://c/a")
        )
    _crew(hub, "c", CrewState.COMPLETED, consuming=message)
    assert hub.load_snapshot("c") is None
    assert hub.load_pending_waits("c") == []
    assert not hub.is_processed(message.id, "c")


def test_a_failed_crew_is_kept_seven_days_then_deleted(open_store: Opener, clock: ok.VirtualClock) -> None:
    rt = open_store(clock=clock)
    hub = durable(rt)
    hub.register_mailbox("agent://c/a")
    message = hub.bind("x", "y").post("agent://c/a", 1)
    _crew(hub, "c", CrewState.FAILED, consuming=message)
    _advance(clock, hub, 6 * DAY)
    assert hub.load_snapshot("c") is not None
    assert hub.is_processed(message.id, "c"), "processed rows live as long as the snapshot"
    _advance(clock, hub, 1 * DAY + 3600)
    assert hub.load_snapshot("c") is None
    assert not hub.is_processed(message.id, "c")
    report = hub.purger.last_report
    assert report is not None and report.failed_crews == 1 and report.processed_messages == 1


def test_an_asleep_crew_is_kept_while_it_waits_and_an_orphan_is_collected(
    open_store: Opener, clock: ok.VirtualClock
) -> None:
    rt = open_store(clock=clock)
    hub = durable(rt)
    with hub.unit_of_work("waiting") as uow:
        uow.save_snapshot({}, mode="parallel", schema_version=1, state=CrewState.ASLEEP)
        uow.put_pending_wait(
            PendingWaitRecord("w1", "waiting", PendingWaitKind.ON_TOPIC, clock.now(), topic="orders.*")
        )
    _crew(hub, "orphan", CrewState.ASLEEP)
    _crew(hub, "busy", CrewState.ACTIVE)
    _advance(clock, hub, 30 * DAY)
    assert hub.load_snapshot("waiting") is not None
    assert [w.wait_id for w in hub.load_pending_waits("waiting")] == ["w1"]
    assert hub.load_snapshot("orphan") is None
    assert hub.load_snapshot("busy") is not None


def test_processed_rows_of_crews_without_snapshot_and_old_outbox_rows_expire(
    open_store: Opener, clock: ok.VirtualClock
) -> None:
    rt = open_store(clock=clock)
    hub = durable(rt)
    hub.register_mailbox("agent://c/a")
    message = hub.bind("x", "y").post("agent://c/a", 1)
    with hub.unit_of_work("stateless", consuming=message) as uow:
        uow.post("agent://c/a", "reply")
    wait_until(lambda: not hub.outbox_records(pending_only=True), what="dispatch")
    _advance(clock, hub, 2 * DAY)
    assert hub.outbox_records() == [], "dispatched rows are kept one day"
    assert hub.is_processed(message.id, "stateless")
    _advance(clock, hub, 6 * DAY)
    assert not hub.is_processed(message.id, "stateless")
    assert not hub.purger.armed, "nothing left to purge: no timer"


def test_purge_now_reports_and_the_policy_is_configurable(
    open_store: Opener, clock: ok.VirtualClock, store_path: object
) -> None:
    policy = PurgePolicy(failed_retention=timedelta(hours=2), interval=timedelta(minutes=10))
    rt = open_store(clock=clock, store=StoreConfig(str(store_path), purge=policy))
    hub = durable(rt)
    _crew(hub, "c", CrewState.FAILED)
    assert hub.purge_now().total == 0
    clock.advance(3 * 3600)
    wait_until(lambda: hub.load_snapshot("c") is None, what="the failed crew to be purged")
    assert hub.purge_now().total == 0


def test_a_policy_refuses_nonsense() -> None:
    with pytest.raises(ok.errors.InvalidArgumentError):
        PurgePolicy(failed_retention=timedelta(0))
