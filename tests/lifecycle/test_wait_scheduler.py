"""``DurableWaitScheduler`` (spec §3.3 ``WaitScheduler``): the finite waits of sleeping
crews, read from the ``pending_waits`` index a bounded window at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.scheduler import TimerHandle
from orkeon_actors.lifecycle import WaitScheduler
from orkeon_actors.lifecycle.wait_scheduler import DurableWaitScheduler
from orkeon_actors.model.clock import VirtualClock
from orkeon_actors.model.ids import CrewId, new_ulid_str
from orkeon_actors.store import StoreConfig
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.reader import ReaderPool
from orkeon_actors.store.records import PendingWaitKind, PendingWaitRecord, to_row
from orkeon_actors.store.schema import migrate
from orkeon_actors.store.wake_index import WINDOW_SQL, SqliteExpiryIndex

START = datetime.fromisoformat("2026-01-01T00:00:00+00:00")


class ManualScheduler:
    """Timers fired by the test, on the test's thread (it owns the wait scheduler)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.timers: list[TimerHandle] = []

    def schedule_at(self, deadline: float, callback: Callable[[], None]) -> TimerHandle:
        handle = TimerHandle(deadline, callback)
        self.timers.append(handle)
        return handle

    def fire(self) -> int:
        due = [t for t in self.timers if not t.cancelled and t.deadline <= self.clock.monotonic()]
        self.timers = [t for t in self.timers if t not in due]
        for timer in due:
            timer.callback()
        return len(due)


class Store:
    def __init__(self, path: Path) -> None:
        self.path = str(path)
        conn = apsw.Connection(self.path)
        migrate(conn, self.path)
        conn.execute("PRAGMA journal_mode = WAL")
        self.conn = conn
        self.readers = ReaderPool(StoreConfig(self.path))

    def add(self, crew: str, expires_at: datetime | None) -> str:
        wait_id = new_ulid_str()
        record = PendingWaitRecord(wait_id, CrewId(crew), PendingWaitKind.ON_TOPIC, START, expires_at, topic="t")
        self.conn.execute(
            "INSERT OR IGNORE INTO crew_snapshots VALUES (?, x'00', 'sequential', 1, ?, 'Asleep')",
            (crew, format_time(START)),
        )
        self.conn.execute(
            "INSERT INTO pending_waits (wait_id, crew_id, kind, started_at, expires_at, topic, target_crew_id, "
            "target_mailbox, correlation_id, metadata_match) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            to_row(record),
        )
        return wait_id

    def remove(self, wait_id: str) -> None:
        self.conn.execute("DELETE FROM pending_waits WHERE wait_id = ?", (wait_id,))

    def close(self) -> None:
        self.readers.close()
        self.conn.close()


class Rig:
    def __init__(self, store: Store, *, window: float = 60.0, window_size: int = 10_000, batch: int = 64) -> None:
        self.store = store
        self.clock = VirtualClock(START)
        self.timers = ManualScheduler(self.clock)
        self.ticks = 0
        self.scheduler = DurableWaitScheduler(
            SqliteExpiryIndex(store.readers),
            self.clock,
            self.timers,
            self._tick,
            window=window,
            window_size=window_size,
            batch=batch,
        )

    def _tick(self) -> None:
        self.ticks += 1

    def advance(self, seconds: float) -> dict[CrewId, list[str]]:
        """Advance the clock; run every tick the timers ask for (as the supervisor does)."""
        if seconds:
            self.clock.advance(seconds)
        out: dict[CrewId, list[str]] = {}
        while self.timers.fire():
            for crew, waits in self.scheduler.due().items():
                out.setdefault(crew, []).extend(waits)
        return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "waits.db")
    yield s
    s.close()


def test_an_expiry_already_past_at_start_is_due_at_once_and_forever_waits_never(store: Store) -> None:
    past = store.add("late", START - timedelta(seconds=5))
    store.add("forever", None)
    rig = Rig(store)
    rig.scheduler.start()
    assert rig.advance(0) == {CrewId("late"): [past]}
    assert rig.advance(10 * 365 * 86400) == {}


def test_expiries_are_due_at_their_time_in_order_and_only_once(store: Store) -> None:
    a = store.add("a", START + timedelta(seconds=10))
    b = store.add("b", START + timedelta(seconds=20))
    rig = Rig(store)
    rig.scheduler.start()
    assert rig.advance(9) == {}
    assert rig.advance(1) == {CrewId("a"): [a]}
    assert rig.advance(9) == {}
    assert rig.advance(1) == {CrewId("b"): [b]}
    assert rig.advance(100) == {}


def test_memory_holds_one_window_and_the_next_is_read_when_it_is_used_up(store: Store) -> None:
    waits = [store.add(f"c{i:02d}", START + timedelta(seconds=1 + i)) for i in range(25)]
    rig = Rig(store, window_size=10)
    rig.scheduler.start()
    assert rig.scheduler.held == 10
    seen: list[str] = []
    for _ in range(25):
        for crew_waits in rig.advance(1).values():
            seen.extend(crew_waits)
        assert rig.scheduler.held <= 10
    assert seen == waits


def test_a_burst_of_expiries_is_handed_over_a_batch_of_crews_per_tick(store: Store) -> None:
    waits = [store.add(f"c{i:02d}", START + timedelta(seconds=10)) for i in range(10)]
    rig = Rig(store, batch=3)
    rig.scheduler.start()
    rig.clock.advance(10)
    ticks: list[list[str]] = []
    while rig.timers.fire():  # each tick re-arms at once while more are due
        ticks.append([w for ws in rig.scheduler.due().values() for w in ws])
    assert [len(t) for t in ticks] == [3, 3, 3, 1]
    assert [w for t in ticks for w in t] == waits


def test_the_owner_may_ask_for_fewer_crews_and_asking_early_keeps_one_timer_armed(store: Store) -> None:
    waits = [store.add(f"c{i:02d}", START + timedelta(seconds=10)) for i in range(10)]
    rig = Rig(store, batch=4)
    rig.scheduler.start()
    rig.clock.advance(10)
    assert list(rig.scheduler.due(limit=2).values()) == [[waits[0]], [waits[1]]]
    assert len(rig.scheduler.due(limit=9)) == 4  # never more than the batch
    assert rig.scheduler.due(limit=0) == {}
    live = [t for t in rig.timers.timers if not t.cancelled]
    assert len(live) == 1  # each early call replaced the armed timer instead of adding one
    rest: list[str] = []
    while rig.timers.fire():
        rest.extend(w for ws in rig.scheduler.due().values() for w in ws)
    assert rest == waits[6:]


def test_a_wait_beyond_the_time_window_is_found_when_time_reaches_it(store: Store) -> None:
    far = store.add("far", START + timedelta(hours=2))
    rig = Rig(store, window=60)
    rig.scheduler.start()
    assert rig.scheduler.held == 0
    assert rig.advance(3600) == {}
    assert rig.advance(3600) == {CrewId("far"): [far]}


def test_a_wait_gone_from_the_index_is_not_due(store: Store) -> None:
    gone = store.add("woke", START + timedelta(seconds=10))
    kept = store.add("slept", START + timedelta(seconds=10))
    rig = Rig(store)
    rig.scheduler.start()
    store.remove(gone)  # its crew woke (a message) and its snapshot replaced the wait
    assert rig.advance(10) == {CrewId("slept"): [kept]}


def test_a_wait_scheduled_inside_the_read_window_is_held_and_a_cancelled_one_is_not(store: Store) -> None:
    rig = Rig(store)
    rig.scheduler.start()
    new = store.add("new", START + timedelta(seconds=30))  # written after the window was read
    rig.scheduler.schedule(CrewId("new"), new, START + timedelta(seconds=30))
    other = store.add("other", START + timedelta(seconds=40))
    rig.scheduler.schedule(CrewId("other"), other, START + timedelta(seconds=40))
    rig.scheduler.cancel(other)
    assert rig.advance(30) == {CrewId("new"): [new]}
    assert rig.advance(30) == {}


def test_the_window_is_read_from_its_covering_index_without_sorting(store: Store) -> None:
    plan = " ".join(str(row[3]) for row in store.conn.execute("EXPLAIN QUERY PLAN " + WINDOW_SQL, ("", "", "", 10)))
    assert "COVERING INDEX idx_pending_waits_expiry_order" in plan and "TEMP B-TREE" not in plan


def test_bad_window_bounds_are_refused(store: Store) -> None:
    clock = VirtualClock(START)
    with pytest.raises(InvalidArgumentError, match="window_size"):
        DurableWaitScheduler(
            SqliteExpiryIndex(store.readers), clock, ManualScheduler(clock), lambda: None, window_size=0
        )
    with pytest.raises(InvalidArgumentError, match="batch"):
        DurableWaitScheduler(SqliteExpiryIndex(store.readers), clock, ManualScheduler(clock), lambda: None, batch=0)
    with pytest.raises(InvalidArgumentError, match="window must be"):
        DurableWaitScheduler(SqliteExpiryIndex(store.readers), clock, ManualScheduler(clock), lambda: None, window=0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    offsets=st.lists(st.integers(min_value=-30, max_value=300), min_size=1, max_size=30),
    window=st.integers(min_value=1, max_value=120),
    window_size=st.integers(min_value=1, max_value=8),
    steps=st.lists(st.integers(min_value=0, max_value=90), min_size=1, max_size=12),
    batch=st.integers(min_value=1, max_value=4),
)
def test_every_finite_wait_is_due_exactly_once_never_early(
    tmp_path_factory: pytest.TempPathFactory,
    offsets: list[int],
    window: int,
    window_size: int,
    steps: list[int],
    batch: int,
) -> None:
    store = Store(tmp_path_factory.mktemp("prop") / "waits.db")
    try:
        expiry = {
            store.add(f"c{i}", START + timedelta(seconds=o)): START + timedelta(seconds=o)
            for i, o in enumerate(offsets)
        }
        rig = Rig(store, window=window, window_size=window_size, batch=batch)
        rig.scheduler.start()
        fired: list[str] = []
        for step in [*steps, 400]:
            for waits in rig.advance(step).values():
                for wait_id in waits:
                    assert expiry[wait_id] <= rig.clock.now()  # never early
                    fired.append(wait_id)
            late = [w for w, at in expiry.items() if at <= rig.clock.now() and w not in fired]
            assert late == []  # never late: due as soon as the clock passed it
        assert sorted(fired) == sorted(expiry)  # each exactly once
    finally:
        store.close()


def test_it_implements_the_wait_scheduler_port(store: Store) -> None:
    assert isinstance(Rig(store).scheduler, WaitScheduler)
