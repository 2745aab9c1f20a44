"""``orkeon bench lifecycle`` runs end to end (its figures, not their values), and the
stores it writes in bulk hold crews that really sleep, wake and complete."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import apsw
import attrs
import pykka
import pytest

from orkeon_actors.bench import lifecycle as bench
from orkeon_actors.cli.main import main
from orkeon_actors.crew import Agent, CrewActor, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, respond
from orkeon_actors.crew.snapshot import from_json
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor, LifecycleState, expiry_wakes, supervisor_state
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.runtime import Runtime
from orkeon_actors.store.codec import format_time
from orkeon_actors.testing import wait_until

from .conftest import Env


def test_orkeon_bench_lifecycle_measures_every_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    main(["bench", "lifecycle", "--quick", "--json", "--boot-crews", "3000"])
    figures = json.loads(capsys.readouterr().out)["lifecycle"]
    assert figures["boot_crews"] == 3_000 and figures["wake_crews"] == 2_000 and figures["expiry_crews"] == 300
    expected = {"sleeps_per_s", "populate_s", "boot_ms", "boot_rss_mb", "boot_rss_total_mb"}
    expected |= {"wake_latency_p50_ms", "wake_latency_p99_ms", "expiries_per_s", "expiry_cpu_us"}
    expected |= {"boot_disk_bytes_per_crew", "wake_disk_bytes_per_crew", "wake_loaded_p50_ms", "wake_loaded_p99_ms"}
    expected |= {"wake_load_ops_per_s", "burst_one_at_a_time_per_s", "burst_pipelined_per_s"}
    expected |= {"wake_crew_loaded_p50_ms", "wake_crew_loaded_p99_ms", "wake_crew_load_ops_per_s"}
    expected |= {"burst_pipelined_commit_per_s", "parked_crew_kb", "parked_crew_start_ms", "mass_sleep_rss_live_mb"}
    assert expected <= set(figures)
    assert all(figures[key] > 0 for key in expected - {"boot_rss_mb"})
    assert figures["burst_one_at_a_time_posts"] == 50 and figures["burst_pipelined_posts"] == 300
    assert figures["mass_sleep_crews"] == 300
    assert list(tmp_path.iterdir()) == []  # its stores removed


def test_orkeon_bench_wakecost_times_every_step_of_a_wake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    main(["bench", "wakecost", "--quick", "--json"])
    figures = json.loads(capsys.readouterr().out)["wakecost"]
    steps = ["snapshot_read_us", "snapshot_json_us", "snapshot_structure_us", "crew_build_us"]
    steps += ["mailbox_reopen_us", "mailbox_close_us", "crew_stop_us"]
    assert figures["crews"] == 200
    assert all(figures[step] > 0 for step in steps)
    assert figures["steps_us"] == pytest.approx(sum(figures[step] for step in steps), abs=1e-3)
    assert figures["steps_ceiling_per_s"] == pytest.approx(1e6 / figures["steps_us"], rel=1e-3)
    assert list(tmp_path.iterdir()) == []  # its store removed


def test_the_bench_waits_for_a_burst_on_an_event_set_by_the_last_delivery() -> None:
    deliveries = bench.Deliveries()
    deliveries.record("x", True)  # recorded before: forgotten by expect_all
    done = deliveries.expect_all(["x", "y"])
    deliveries.record("y", True)
    deliveries.record("z", False)  # not awaited
    assert not done.is_set()
    deliveries.record("x", True)
    assert done.is_set() and set(deliveries.at) == {"x", "y", "z"}
    assert bench.Deliveries().expect_all([]).is_set()


def test_a_bulk_written_store_holds_crews_that_wake_like_really_slept_ones(tmp_path: Path) -> None:
    forever = bench.capture_template(str(tmp_path / "forever.db"), bench.FOREVER_NAME)
    finite = bench.capture_template(str(tmp_path / "finite.db"), bench.FINITE_NAME)
    assert finite.expires_at is not None and forever.expires_at is None

    db = str(tmp_path / "bulk.db")
    bench.populate(db, forever, ["f1", "f2", "f3"])
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=bench.FACTORIES)
    try:
        assert sup.booted_asleep == 3 and sup.stats.wakes == 0
        assert {w.crew_id for w in rt.hub.load_pending_waits()} == {"f1", "f2", "f3"}
        assert len({w.wait_id for w in rt.hub.load_pending_waits()}) == 3  # fresh wait ids
        delivered = bench.DELIVERIES.expect("f2")
        rt.hub.bind("test", "poster").post("agent://f2/a", "wake up")
        assert delivered.wait(10)
        wait_until(lambda: sup.state("f2") is LifecycleState.COMPLETED, what="f2 completed")
        assert bench.DELIVERIES.at["f2"][2] is False  # the post, not a timeout
        assert sup.state("f1") is LifecycleState.ASLEEP and sup.state("f3") is LifecycleState.ASLEEP
    finally:
        sup.stop()
        rt.stop()


def test_bulk_written_finite_waits_expire_at_the_moved_instant(env: Env) -> None:
    finite = bench.capture_template(str(env.db.parent / "finite.db"), bench.FINITE_NAME)
    instant = env.clock.now()
    bench.populate(str(env.db), finite, ["e1", "e2"], expires_at=instant)
    conn = apsw.Connection(str(env.db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        expiries = conn.execute("SELECT crew_id, expires_at FROM pending_waits ORDER BY crew_id").fetchall()
    finally:
        conn.close()
    assert expiries == [("e1", format_time(instant)), ("e2", format_time(instant))]
    env.factories.update(bench.FACTORIES)
    sup = env.boot()
    for crew in ("e1", "e2"):  # already past at boot: woken at once with the timeout
        assert env.settle(crew, CrewStatus.COMPLETED) is CrewStatus.COMPLETED
        assert bench.DELIVERIES.at[crew][2] is True
    assert sup.stats.expiries == 2


def test_the_expiry_run_wakes_crews_of_two_agents_each_agent_taking_its_turn(env: Env) -> None:
    """The expiry target is about crews of two agents: the bench's expiring crews hold
    two agents, the first given the timeout, the second's task run after it."""
    pair = bench.capture_template(str(env.db.parent / "pair.db"), bench.PAIR_NAME)
    assert [a.agent_id for a in from_json(bytes(pair.snapshot[1]).decode()).agents] == ["a", "b"]
    bench.populate(str(env.db), pair, ["p1", "p2"], expires_at=env.clock.now())
    env.factories.update(bench.FACTORIES)
    sup = env.boot()
    for crew in ("p1", "p2"):
        assert env.settle(crew, CrewStatus.COMPLETED) is CrewStatus.COMPLETED
        assert bench.DELIVERIES.at[crew][2] is True  # agent a: the timeout
        assert sup.wait_finished(crew, timeout=30).result == "reported"  # agent b's task, after it
    assert sup.stats.expiries == 2


def test_a_burst_of_expiries_starts_at_most_64_crews_until_they_have_restored(env: Env) -> None:
    """Backpressure: the supervisor hands over the next batch of due crews only while
    fewer than 64 woken crews have not finished restoring (here: their model, called
    with the timeout during the restore, blocks). Releasing them lets the rest wake."""
    finite = bench.capture_template(str(env.db.parent / "finite.db"), bench.FINITE_NAME)
    crews = [f"e{i:03d}" for i in range(100)]
    bench.populate(str(env.db), finite, crews, expires_at=env.clock.now())
    gate = threading.Event()
    lock = threading.Lock()
    blocked = [0, 0]  # now, most at once

    def policy(request: ModelRequest) -> ModelResponse:
        with lock:
            blocked[0] += 1
            blocked[1] = max(blocked)
        gate.wait(60)
        with lock:
            blocked[0] -= 1
        return respond("done")

    def factory(_crew: object) -> CrewBlueprint:
        agent = Agent("a", ScriptedModel(policy=policy))
        return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("wait", agent.agent_id)]))

    env.factories[bench.FINITE_NAME] = factory
    sup = env.boot()
    try:
        wait_until(lambda: blocked[0] == 64 and sup.shared.tick_deferred, what="64 restoring, the others held back")
        assert sup.stats.wakes == 64
    finally:
        gate.set()
    wait_until(lambda: sup.stats.wakes == 100, what="the other 36 woken")
    for crew in crews:
        wait_until(lambda c=crew: sup.state(c) is LifecycleState.COMPLETED, what=f"{crew} completed")  # type: ignore[misc]
    assert blocked[1] == 64 and sup.stats.expiries == 100


def test_woken_crews_whose_actor_died_before_restoring_stop_holding_a_burst_back(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Backpressure counts the woken crews that have not restored; one whose actor died
    before restoring never reports, and the deferred tick's timer forgets it."""
    monkeypatch.setattr(expiry_wakes, "MAX_ACTIVATING", 2)
    monkeypatch.setattr(expiry_wakes, "RESUME_ACTIVATING", 1)
    monkeypatch.setattr(supervisor_state, "RESUME_ACTIVATING", 1)
    finite = bench.capture_template(str(env.db.parent / "finite.db"), bench.FINITE_NAME)
    crews = [f"e{i}" for i in range(5)]
    bench.populate(str(env.db), finite, crews, expires_at=env.clock.now())
    built = itertools.count()

    class DiesAtStart(CrewActor):
        start_on_first_message = False  # on_start runs (and fails) at start, before any restore

        @classmethod
        def start(cls, *args: Any, **kwargs: Any) -> pykka.ActorRef[Any]:
            ref = super().start(*args, **kwargs)
            ref.actor_stopped.wait(10)  # dead before the supervisor tells it to restore
            return ref

        def on_start(self) -> None:
            raise RuntimeError("dies before restoring")

    def factory(crew: object) -> CrewBlueprint:
        blueprint = bench.FACTORIES[bench.FINITE_NAME]
        assert isinstance(blueprint, CrewBlueprint)
        return attrs.evolve(blueprint, cls=DiesAtStart) if next(built) < 2 else blueprint

    env.factories[bench.FINITE_NAME] = factory
    sup = env.boot()
    shared = sup.shared
    wait_until(lambda: len(shared.activating) == 2 and shared.tick_deferred, what="two dead crews holding the rest")
    assert sup.stats.expiries == 2
    env.clock.advance(0.1)  # past the deferred tick's timer (50 ms)

    def outcome() -> list[str]:
        return sorted(sup.state(c).value for c in crews)

    wait_until(lambda: outcome() == ["Asleep", "Asleep", "Completed", "Completed", "Completed"], what="3 done")
    assert sup.stats.expiries == 5
    asleep = {c for c in crews if sup.state(c) is LifecycleState.ASLEEP}  # the two dead ones, on their snapshots
    wait_until(lambda: {str(w.crew_id) for w in env.hub.load_pending_waits()} == asleep, what="their waits kept")


def test_the_live_cursor_bench_publishes_to_a_woken_crew_that_reads_them_all(tmp_path: Path) -> None:
    from orkeon_actors.bench.live_cursor import publishes_per_second

    for volatile in (False, True):
        assert publishes_per_second(tmp_path, 20, 2, volatile=volatile) > 0  # the reader finished: all read


def test_orkeon_bench_pauseresume_measures_both_sides_or_says_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from orkeon_actors.bench.pause_resume import langgraph_available

    monkeypatch.chdir(tmp_path)
    main(["bench", "pauseresume", "--quick"])
    table = capsys.readouterr().out
    for paused in (200, 1_000):
        for figure in (
            "orkeon_resume_per_s",
            "orkeon_resume_p99_ms",
            "orkeon_first_resume_ms",
            "orkeon_disk_bytes_per_paused",
        ):
            assert f"{figure}_{paused} " in table
        assert (f"resume_throughput_vs_langgraph_{paused} " in table) is langgraph_available()
    assert ("LangGraph rows SKIPPED" in table) is not langgraph_available()
    assert list(tmp_path.iterdir()) == []
