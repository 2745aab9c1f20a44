"""The store's count of crews with pending waits (schema version 8, ``store_counts``)
equals ``count(DISTINCT crew_id)`` of ``pending_waits`` after any sequence of the
writes the store makes: waits put (``INSERT OR REPLACE``), deleted one by one, deleted
with their crew (foreign-key cascade), moved to another crew, or refused."""

from __future__ import annotations

from pathlib import Path

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.store.schema import ASLEEP_COUNT_SQL, migrate
from orkeon_actors.store.unit_of_work import PUT_WAIT

CREWS = ["a", "b", "c"]
WAITS = ["w1", "w2", "w3", "w4"]

operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(WAITS), st.sampled_from([*CREWS, "unknown"])),
        st.tuples(st.just("delete_wait"), st.sampled_from(WAITS), st.just("")),
        st.tuples(st.just("delete_crew"), st.sampled_from(CREWS), st.just("")),
        st.tuples(st.just("move"), st.sampled_from(WAITS), st.sampled_from(CREWS)),
        st.tuples(st.just("snapshot"), st.sampled_from(CREWS), st.just("")),
    ),
    max_size=30,
)


def _apply(conn: apsw.Connection, op: str, key: str, crew: str) -> None:
    if op == "put":
        row = (key, crew, "OnMailbox", "2026-01-01T00:00:00Z", None, None, None, f"agent://{crew}/a", None, None)
        try:
            conn.execute(PUT_WAIT, row)
        except apsw.ConstraintError:  # a crew without a snapshot: refused, nothing written
            pass
    elif op == "delete_wait":
        conn.execute("DELETE FROM pending_waits WHERE wait_id = ?", (key,))
    elif op == "delete_crew":
        conn.execute("DELETE FROM crew_snapshots WHERE crew_id = ?", (key,))
    elif op == "move":
        try:
            conn.execute("UPDATE pending_waits SET crew_id = ? WHERE wait_id = ?", (crew, key))
        except apsw.ConstraintError:  # the crew has no snapshot
            pass
    else:
        conn.execute(
            "INSERT OR IGNORE INTO crew_snapshots VALUES (?, x'7b7d', 'sequential', 3, '2026-01-01T00:00:00Z', "
            "'Asleep')",
            (key,),
        )


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_count_of_crews_with_waits_is_exact_after_any_writes(ops: list[tuple[str, str, str]]) -> None:
    conn = apsw.Connection(":memory:")
    conn.execute("PRAGMA foreign_keys = ON")
    migrate(conn, ":memory:")
    for crew in CREWS[:2]:
        _apply(conn, "snapshot", crew, "")
    for op, key, crew in ops:
        _apply(conn, op, key, crew)
        [(kept,)] = conn.execute(ASLEEP_COUNT_SQL).fetchall()
        [(counted,)] = conn.execute("SELECT count(DISTINCT crew_id) FROM pending_waits").fetchall()
        assert kept == counted, (op, key, crew)
    conn.close()


def test_a_wait_id_taken_from_another_crew_moves_the_count() -> None:
    conn = apsw.Connection(":memory:")
    conn.execute("PRAGMA foreign_keys = ON")
    migrate(conn, ":memory:")
    for crew in ("a", "b"):
        _apply(conn, "snapshot", crew, "")
    _apply(conn, "put", "w1", "a")
    _apply(conn, "put", "w1", "b")  # replaces a's only wait: a leaves, b joins
    assert conn.execute(ASLEEP_COUNT_SQL).fetchall() == [(1,)]
    conn.close()


def test_a_new_store_counts_no_crew(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "s.db"))
    migrate(conn, str(tmp_path / "s.db"))
    assert conn.execute(ASLEEP_COUNT_SQL).fetchall() == [(0,)]
    conn.close()
