"""``orkeon bench pauseresume``: a durable pause and resume, beside LangGraph's.

Both sides on SQLite in WAL mode with ``synchronous=FULL``, in the same run and the same
process, one after the other, at ``N`` paused (2,000 and 20,000; ``--quick``: 200 and
1,000):

* **orkeon**: ``N`` crews asleep, each agent parked on ``receive_message`` (the store
  written by the lifecycle bench's :func:`~orkeon_actors.bench.lifecycle.populate`,
  the rows the real sleep path wrote for one crew copied per crew); a resume is a post
  to the agent, done once the crew finished durably (``wait_finished``: its outcome
  committed);
* **langgraph**: a one-node graph whose node calls ``interrupt()``, compiled with
  ``SqliteSaver``; ``N`` threads paused there (the rows of one really paused thread
  copied per thread, as above); a resume is ``invoke(Command(resume=...))``, done when
  it returns (the resumed checkpoint committed).

Figures per ``N``: ``resume_per_s`` (``T`` resumes back to back from one thread: orkeon
posts them pipelined with ``post_nowait``, LangGraph invokes one after the other),
``resume_p99_ms`` (``L`` resumes one at a time), ``disk_bytes_per_paused`` (the store's
file and WAL over ``N``, before any resume), and their ratios orkeon / LangGraph.
LangGraph comes with the ``bench`` extra (``pip install 'orkeon-actors[bench]'``);
without it the peer figures are left out and the notes say so.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import wait
from typing import Any

from orkeon_actors.bench.context import progress, scratch_directory
from orkeon_actors.bench.lifecycle import (
    DELIVERIES,
    FACTORIES,
    FOREVER_NAME,
    bench_crew_ids,
    capture_template,
    info_logging,
    populate,
)
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.lifecycle import CrewSupervisor
from orkeon_actors.runtime import Runtime

__all__ = ["bench_pause_resume", "langgraph_available"]

_TEMPLATE_THREAD = "zzbenchthreadzz"


def langgraph_available() -> bool:
    """Whether LangGraph and its SQLite checkpointer are installed (the ``bench`` extra)."""
    return all(importlib.util.find_spec(name) is not None for name in ("langgraph", "langgraph.checkpoint.sqlite"))


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def _disk(path: str) -> int:
    return sum(os.path.getsize(path + suffix) for suffix in ("", "-wal") if os.path.exists(path + suffix))


# -- orkeon ---------------------------------------------------------------------------


def _orkeon(directory: str, paused: int, samples: int, burst: int) -> dict[str, float]:
    template = capture_template(os.path.join(directory, f"template-{paused}.db"), FOREVER_NAME)
    db = os.path.join(directory, f"orkeon-{paused}.db")
    crews = bench_crew_ids(paused)
    populate(db, template, crews)
    disk = _disk(db) / paused
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=FACTORIES)
    try:
        client = rt.hub.bind("bench", "resumer")
        latencies = []
        for crew in crews[:samples]:
            started = time.perf_counter()
            client.post(f"agent://{crew}/a", {"resume": crew})
            sup.wait_finished(crew, timeout=60)
            latencies.append(time.perf_counter() - started)
        batch = crews[samples : samples + burst]
        delivered = DELIVERIES.expect_all(batch)
        started = time.perf_counter()
        wait([client.post_nowait(f"agent://{crew}/a", {"resume": crew}) for crew in batch])
        if not delivered.wait(600):
            raise RuntimeError(f"{burst} resumed crews did not all get their message within 600 s")
        for crew in batch:
            sup.wait_finished(crew, timeout=60)
        elapsed = time.perf_counter() - started
    finally:
        sup.stop()
        rt.stop()
    return {"resume_per_s": burst / elapsed, "resume_p99_ms": _pct(latencies, 0.99) * 1000, "disk": disk}


# -- langgraph ------------------------------------------------------------------------


def _graph(conn: sqlite3.Connection) -> Any:
    from typing import TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    class State(TypedDict):
        value: str

    def wait_for_answer(state: State) -> dict[str, Any]:
        return {"value": interrupt("waiting")}

    graph = StateGraph(State)
    graph.add_node("wait", wait_for_answer)
    graph.add_edge(START, "wait")
    graph.add_edge("wait", END)
    saver = SqliteSaver(conn)
    saver.setup()
    return graph.compile(checkpointer=saver)


def _copy_thread(conn: sqlite3.Connection, threads: list[str]) -> None:
    """Every table's rows of the template thread, copied once per thread of ``threads``."""
    for table in ("checkpoints", "writes"):
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        rows = conn.execute(f"SELECT * FROM {table} WHERE thread_id = ?", (_TEMPLATE_THREAD,)).fetchall()
        for row in rows:
            if any(isinstance(v, bytes) and _TEMPLATE_THREAD.encode() in v for v in row):
                raise RuntimeError(f"a {table} blob names its thread: the copies would not be faithful")
        at = columns.index("thread_id")
        marks = ", ".join("?" * len(columns))
        conn.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
            [(*row[:at], thread, *row[at + 1 :]) for thread in threads for row in rows],
        )


def _langgraph(directory: str, paused: int, samples: int, burst: int) -> dict[str, float]:
    from langgraph.types import Command

    db = os.path.join(directory, f"langgraph-{paused}.db")
    conn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        app = _graph(conn)
        app.invoke({"value": ""}, {"configurable": {"thread_id": _TEMPLATE_THREAD}})
        threads = [f"t{i:07d}" for i in range(paused)]
        conn.execute("BEGIN")
        _copy_thread(conn, threads)
        conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (_TEMPLATE_THREAD,))
        conn.execute("DELETE FROM writes WHERE thread_id = ?", (_TEMPLATE_THREAD,))
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        disk = _disk(db) / paused

        def resume(thread: str) -> None:
            result = app.invoke(Command(resume="go"), {"configurable": {"thread_id": thread}})
            if result.get("value") != "go":
                raise RuntimeError(f"thread {thread} resumed to {result!r}")

        latencies = []
        for thread in threads[:samples]:
            started = time.perf_counter()
            resume(thread)
            latencies.append(time.perf_counter() - started)
        started = time.perf_counter()
        for thread in threads[samples : samples + burst]:
            resume(thread)
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    return {"resume_per_s": burst / elapsed, "resume_p99_ms": _pct(latencies, 0.99) * 1000, "disk": disk}


# -- the suite ------------------------------------------------------------------------


def _side(name: str, run: Callable[[], dict[str, float]], figures: dict[str, float], paused: int) -> None:
    progress(f"{name} with {paused:,} paused")
    result = run()
    figures[f"{name}_resume_per_s_{paused}"] = result["resume_per_s"]
    figures[f"{name}_resume_p99_ms_{paused}"] = result["resume_p99_ms"]
    figures[f"{name}_disk_bytes_per_paused_{paused}"] = result["disk"]


@register("pauseresume")
def bench_pause_resume(quick: bool) -> BenchResult:
    sizes, samples, burst = ((200, 1_000), 50, 100) if quick else ((2_000, 20_000), 300, 1_000)
    peer = langgraph_available()
    figures: dict[str, float] = {}
    directory = scratch_directory("orkeon-bench-pauseresume-")
    try:
        with info_logging():
            for paused in sizes:
                _side("orkeon", lambda n=paused: _orkeon(directory, n, samples, burst), figures, paused)  # type: ignore[misc]
                if peer:
                    _side("langgraph", lambda n=paused: _langgraph(directory, n, samples, burst), figures, paused)  # type: ignore[misc]
                    figures[f"resume_throughput_vs_langgraph_{paused}"] = (
                        figures[f"orkeon_resume_per_s_{paused}"] / figures[f"langgraph_resume_per_s_{paused}"]
                    )
                    figures[f"resume_p99_vs_langgraph_{paused}"] = (
                        figures[f"orkeon_resume_p99_ms_{paused}"] / figures[f"langgraph_resume_p99_ms_{paused}"]
                    )
                    figures[f"disk_per_paused_vs_langgraph_{paused}"] = (
                        figures[f"orkeon_disk_bytes_per_paused_{paused}"]
                        / figures[f"langgraph_disk_bytes_per_paused_{paused}"]
                    )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    units = {}
    for key in figures:
        units[key] = (
            "resumes/s" if "_per_s_" in key else "ms" if "_ms_" in key else "bytes" if "bytes" in key else "ratio"
        )
    notes = (
        f"{samples} resumes one at a time, then {burst:,} back to back, at {' and '.join(f'{n:,}' for n in sizes)} "
        "paused; SQLite WAL, synchronous=FULL on both sides"
    )
    if not peer:
        notes += (
            "; LangGraph rows SKIPPED: langgraph and langgraph-checkpoint-sqlite are not installed "
            "(pip install 'orkeon-actors[bench]')"
        )
    return BenchResult("pauseresume", figures, units, notes=notes)
