"""Boot reads nothing per sleeping crew (spec §7.3 lazy boot at scale): the number of
crews asleep is one row the store keeps (schema version 8), right after sleeps, wakes,
completions, failures and restarts, and counted once when an older store migrates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from orkeon_actors.bench import lifecycle as bench
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.runtime import Runtime
from orkeon_actors.store import SCHEMA_VERSION

from .conftest import Env
from .test_sleep_wake import _crew

LOOP_STEPS = 1_000
"""Steps of SQLite's virtual machine a boot statement may take at most: a read of one
index entry per sleeping crew would take several per crew (3,000 here)."""


def _crews_with_waits(db: Path) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        row = conn.execute("SELECT count(DISTINCT crew_id) FROM pending_waits").fetchone()
        assert row is not None
        return int(row[0])
    finally:
        conn.close()


@pytest.fixture
def statement_steps() -> Iterator[dict[str, int]]:
    """The most virtual-machine steps each SQL statement took, on every connection
    opened while the fixture is active (``apsw.connection_hooks``)."""
    steps: dict[str, int] = {}

    def trace(event: dict[str, object]) -> None:
        status = event.get("stmt_status")
        if isinstance(status, dict):
            sql = str(event["sql"])
            steps[sql] = max(steps.get(sql, 0), int(status["SQLITE_STMTSTATUS_VM_STEP"]))

    def hook(conn: apsw.Connection) -> None:
        conn.trace_v2(apsw.SQLITE_TRACE_PROFILE, trace)

    apsw.connection_hooks.append(hook)
    try:
        yield steps
    finally:
        apsw.connection_hooks.remove(hook)


def test_booting_3000_sleeping_crews_runs_no_statement_that_reads_each_of_them(
    tmp_path: Path, statement_steps: dict[str, int]
) -> None:
    template = bench.capture_template(str(tmp_path / "template.db"), bench.FOREVER_NAME)
    db = str(tmp_path / "boot.db")
    bench.populate(db, template, bench.bench_crew_ids(3_000))
    statement_steps.clear()
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=bench.FACTORIES)
    try:
        booted = dict(statement_steps)
        assert sup.booted_asleep == 3_000 and sup.stats.asleep == 3_000 and sup.stats.wakes == 0
    finally:
        sup.stop()
        rt.stop()
    # integrity_check runs only on small files (store.identity), never on a big store
    heavy = {sql: n for sql, n in booted.items() if n > LOOP_STEPS and not sql.startswith("PRAGMA integrity_check")}
    assert heavy == {}
    assert any("store_counts" in sql for sql in booted)  # the count came from its row


def _failing(request: ModelRequest) -> ModelResponse:
    if request.turn == 0:
        return call("receive_message", {"wait_forever": True})
    raise RuntimeError("the model broke")


def test_the_count_at_boot_follows_sleeps_wakes_completions_and_failures(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    env.factories["f"] = lambda _: CrewBlueprint(
        agents=[Agent("a", ScriptedModel(policy=_failing))], orchestration=Sequential([Task("go", "a")])
    )
    sup = env.boot()
    for crew in ("c1", "c2", "c3", "c4"):
        sup.spawn("c", crew)
    sup.spawn("f", "f1")
    for crew in ("c1", "c2", "c3", "c4", "f1"):
        env.settle(crew)
        assert sup.sleep(crew)
    sup = env.restart()
    assert sup.booted_asleep == 5 == _crews_with_waits(env.db)
    poster = env.hub.bind("o")
    poster.post("agent://c1/a", "wake")  # completes: deleted
    poster.post("agent://f1/a", "wake")  # fails: kept for audit, without waits
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    assert env.summary("f1")[0] is CrewStatus.FAILED
    poster.post("agent://c2/a", "wake")
    assert env.settle("c2", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    sup.spawn("c", "c5")
    env.settle("c5")
    assert sup.sleep("c5")
    sup = env.restart()
    assert sup.booted_asleep == 3 == _crews_with_waits(env.db)  # c3, c4, c5
    assert all(sup.state(c) is LifecycleState.ASLEEP for c in ("c3", "c4", "c5"))


def test_a_version_7_store_counts_its_sleeping_crews_once_when_it_migrates(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot()
    for crew in ("c1", "c2"):
        sup.spawn("c", crew)
        env.settle(crew)
        assert sup.sleep(crew)
    env.shutdown()
    conn = apsw.Connection(str(env.db))  # as version 7 left it: no count, no triggers
    for trigger in ("first_of_crew", "taken_from_crew", "last_of_crew", "crew_gained", "crew_left"):
        conn.execute(f"DROP TRIGGER pending_waits_{trigger}")
    conn.execute("DROP TABLE store_counts")
    conn.execute("DROP TABLE agent_events")  # version 10's
    conn.execute("DROP TABLE sent_epochs")  # version 11's
    conn.execute("ALTER TABLE sent_nodes DROP COLUMN epoch_ms")
    conn.execute("PRAGMA user_version = 7")
    conn.execute(
        "INSERT INTO crew_snapshots SELECT 'c3', snapshot, mode, schema_version, snapshot_at, state "
        "FROM crew_snapshots WHERE crew_id = 'c1'"
    )  # written by the older release: a third crew
    conn.execute(
        "INSERT INTO pending_waits (wait_id, crew_id, kind, target_mailbox, started_at) "
        "VALUES ('01J0000000000000000000000W', 'c3', 'OnMailbox', 'agent://c3/a', '2026-01-01T00:00:00Z')"
    )
    conn.close()
    sup = env.boot()
    assert (env.hub.schema_migrated_from, env.hub.schema_version) == (7, SCHEMA_VERSION)
    assert sup.booted_asleep == 3
    env.hub.bind("o").post("agent://c1/a", "wake")
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    sup = env.restart()
    assert sup.booted_asleep == 2 == _crews_with_waits(env.db)
