"""The single writer: group commit, per-request isolation, ordered acknowledgement."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest

from orkeon_actors.errors import HubStoppedError, StoreWriteError
from orkeon_actors.store import StoreConfig, faults
from orkeon_actors.store.connection import open_connection
from orkeon_actors.store.writer import StoreWriter
from orkeon_actors.testing import wait_until


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[StoreWriter]:
    config = StoreConfig(str(tmp_path / "w.db"))
    conn = open_connection(config)
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    w = StoreWriter(conn)
    yield w
    w.stop()


def _rows(writer: StoreWriter) -> list[int]:
    return writer.execute(lambda conn: [int(r[0]) for r in conn.execute("SELECT n FROM t ORDER BY n")])


def _insert(n: int) -> Callable[[apsw.Connection], int]:
    def work(conn: apsw.Connection) -> int:
        conn.execute("INSERT INTO t VALUES (?)", (n,))
        return n

    return work


def _block(writer: StoreWriter) -> threading.Event:
    """Occupy the writer inside a transaction until the returned event is set."""
    entered, release = threading.Event(), threading.Event()

    def hold(conn: apsw.Connection) -> None:
        entered.set()
        release.wait()

    writer.submit(hold)
    assert entered.wait(10)
    return release


def test_whatever_is_waiting_commits_in_one_transaction(writer: StoreWriter) -> None:
    release = _block(writer)
    order: list[int] = []
    waiters = [writer.submit(_insert(n), after_commit=order.append) for n in range(50)]
    assert not any(w.settled for w in waiters), "nothing is acknowledged before its commit"
    transactions = writer.stats.transactions
    release.set()
    assert [w.wait() for w in waiters] == list(range(50))
    assert order == list(range(50)), "after-commit actions run in enqueue order"
    assert writer.stats.transactions == transactions + 2  # the blocker's batch, then one for all 50
    assert writer.stats.batch_sizes[50] == 1
    assert _rows(writer) == list(range(50))


def test_a_failing_request_is_rolled_back_alone(writer: StoreWriter) -> None:
    release = _block(writer)

    def half_then_fail(conn: apsw.Connection) -> None:
        conn.execute("INSERT INTO t VALUES (100)")
        raise ValueError("handler refused")

    first = writer.submit(_insert(1))
    failing = writer.submit(half_then_fail)
    duplicate = writer.submit(_insert(1), single_statement=True)
    last = writer.submit(_insert(2))
    release.set()
    assert first.wait() == 1 and last.wait() == 2
    with pytest.raises(ValueError, match="refused"):
        failing.wait()
    with pytest.raises(apsw.ConstraintError):
        duplicate.wait()
    assert _rows(writer) == [1, 2]


def test_a_failed_commit_fails_every_request_of_the_batch(writer: StoreWriter) -> None:
    release = _block(writer)
    waiters = [writer.submit(_insert(n)) for n in range(3)]

    def fail_commit(point: str) -> None:
        if point == "writer.before_commit":
            raise OSError("injected I/O error")

    faults.install(fail_commit)
    try:
        release.set()
        for waiter in waiters:
            with pytest.raises(StoreWriteError, match="nothing of it was written"):
                waiter.wait()
    finally:
        faults.uninstall()
    assert _rows(writer) == []
    assert writer.stats.failed_transactions == 2  # the blocker's own batch, then the three


def test_stop_commits_what_is_queued_then_refuses(writer: StoreWriter) -> None:
    release = _block(writer)
    done: list[int] = []
    for n in range(5):
        writer.post(_insert(n), after_commit=done.append)
    stopper = threading.Thread(target=writer.stop)
    stopper.start()
    wait_until(lambda: writer._closed, what="the writer to close its queue")
    with pytest.raises(HubStoppedError):
        writer.submit(_insert(99))
    release.set()
    stopper.join(10)
    assert done == [0, 1, 2, 3, 4]


def test_background_failures_go_to_on_error(writer: StoreWriter) -> None:
    errors: list[BaseException] = []
    writer.post(_insert(1))
    writer.post(_insert(1), on_error=errors.append, single_statement=True)
    wait_until(lambda: errors, what="the duplicate insert to fail")
    assert isinstance(errors[0], apsw.ConstraintError)


def test_an_urgent_request_commits_ahead_of_queued_bulk_ones_of_other_keys(writer: StoreWriter) -> None:
    release = _block(writer)
    order: list[int] = []
    bulk = [writer.submit(_insert(n), after_commit=order.append, key="m1") for n in range(1, 6)]
    same_key = writer.submit(_insert(10), after_commit=order.append, key="m1", urgent=True)
    other_key = writer.submit(_insert(20), after_commit=order.append, key=("m2", "s1"), urgent=True)
    release.set()
    assert [w.wait() for w in bulk] == [1, 2, 3, 4, 5] and same_key.wait() == 10 and other_key.wait() == 20
    assert order == [20, 1, 2, 3, 4, 5, 10], "the urgent one of another key first; the one of m1 after m1's"
    assert writer.stats.urgent_requests == 1
    assert _rows(writer) == [1, 2, 3, 4, 5, 10, 20]


def test_an_urgent_request_never_overtakes_a_keyless_one(writer: StoreWriter) -> None:
    release = _block(writer)
    order: list[int] = []
    keyed = writer.submit(_insert(1), after_commit=order.append, key="m1")
    keyless = writer.submit(_insert(2), after_commit=order.append)
    urgent = writer.submit(_insert(3), after_commit=order.append, key="m3", urgent=True)
    release.set()
    assert (keyed.wait(), keyless.wait(), urgent.wait()) == (1, 2, 3)
    assert order == [1, 2, 3]
    assert writer.stats.urgent_requests == 0


def _bulk_batch_in_progress(writer: StoreWriter, order: list[int]) -> tuple[threading.Event, list[object]]:
    """A bulk batch whose first request (key ``h``, row 100) holds the writer until the
    returned event is set, followed by 39 bulk inserts keyed ``m0``-``m3``."""
    release = _block(writer)
    entered, go = threading.Event(), threading.Event()

    def first(conn: apsw.Connection) -> int:
        entered.set()
        go.wait()
        return _insert(100)(conn)

    waiters: list[object] = [writer.submit(first, after_commit=order.append, key="h")]
    waiters += [writer.submit(_insert(n), after_commit=order.append, key=f"m{n % 4}") for n in range(1, 40)]
    release.set()
    assert entered.wait(10), "the bulk batch started"
    return go, waiters


def test_an_urgent_request_cuts_into_a_bulk_batch_in_progress(writer: StoreWriter) -> None:
    order: list[int] = []
    go, bulk = _bulk_batch_in_progress(writer, order)
    urgent = writer.submit(_insert(200), after_commit=order.append, key="w", urgent=True)
    go.set()
    assert urgent.wait() == 200 and [w.wait() for w in bulk] == [100, *range(1, 40)]  # type: ignore[attr-defined]
    assert order == [100, 200, *range(1, 40)], "committed with the part written so far, the rest after it"
    assert writer.stats.cut_in == 1
    assert _rows(writer) == [*range(1, 40), 100, 200]


def test_an_urgent_request_does_not_cut_in_ahead_of_a_request_of_its_key(writer: StoreWriter) -> None:
    order: list[int] = []
    go, bulk = _bulk_batch_in_progress(writer, order)
    urgent = writer.submit(_insert(200), after_commit=order.append, key="m3", urgent=True)  # as the last one
    go.set()
    assert urgent.wait() == 200 and [w.wait() for w in bulk] == [100, *range(1, 40)]  # type: ignore[attr-defined]
    assert order == [100, *range(1, 40), 200], "the batch's requests keyed m3 first"
    assert writer.stats.cut_in == 0


def test_bulk_batches_are_bounded(tmp_path: Path) -> None:
    conn = open_connection(StoreConfig(str(tmp_path / "b.db")))
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    writer = StoreWriter(conn, bulk_batch=4)
    try:
        release = _block(writer)
        waiters = [writer.submit(_insert(n), key=f"m{n % 3}") for n in range(10)]
        release.set()
        assert [w.wait() for w in waiters] == list(range(10))
        assert writer.stats.batch_sizes[4] == 2 and writer.stats.batch_sizes[2] == 1
    finally:
        writer.stop()
