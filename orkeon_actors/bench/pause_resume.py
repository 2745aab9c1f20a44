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

Figures per ``N``: ``resume_p99_ms`` (``R`` rounds of ``L`` resumes one at a time, each
round on a freshly started side: a new runtime and supervisor, a new connection and
compiled graph; the rounds of the two sides interleaved so that both see the same
moments of a loaded machine: the median of the rounds' p99, with their least and
greatest), ``first_resume_ms`` (the first resume after each restart, median),
``resume_per_s`` (``T`` resumes back to back from one thread: orkeon posts them
pipelined with ``post_nowait``, LangGraph invokes one after the other),
``disk_bytes_per_paused`` (the store's file and WAL over ``N``, before any resume), and
the ratios orkeon / LangGraph (the p99 ratio: the median of the rounds' ratios).
LangGraph comes with the ``bench`` extra (``pip install 'orkeon-actors[bench]'``);
without it the peer figures are left out and the notes say so.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import statistics
import time
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


class _Orkeon:
    """``paused`` crews asleep in a store; each :meth:`round` a restart (a new runtime
    and supervisor on the store) timing resumes one at a time."""

    name = "orkeon"

    def __init__(self, directory: str, paused: int) -> None:
        template = capture_template(os.path.join(directory, f"template-{paused}.db"), FOREVER_NAME)
        self.db = os.path.join(directory, f"orkeon-{paused}.db")
        self.ids = bench_crew_ids(paused)
        populate(self.db, template, self.ids)
        self.disk = _disk(self.db) / paused

    def round(self, crews: list[str]) -> list[float]:
        rt = Runtime.start(store=self.db)
        sup = CrewSupervisor(rt, factories=FACTORIES)
        try:
            client = rt.hub.bind("bench", "resumer")
            latencies = []
            for crew in crews:
                started = time.perf_counter()
                client.post(f"agent://{crew}/a", {"resume": crew})
                sup.wait_finished(crew, timeout=60)
                latencies.append(time.perf_counter() - started)
            return latencies
        finally:
            sup.stop()
            rt.stop()

    def burst(self, crews: list[str]) -> float:
        """Resumes per second, ``crews`` posted with ``post_nowait`` from one thread."""
        rt = Runtime.start(store=self.db)
        sup = CrewSupervisor(rt, factories=FACTORIES)
        try:
            client = rt.hub.bind("bench", "resumer")
            delivered = DELIVERIES.expect_all(crews)
            started = time.perf_counter()
            wait([client.post_nowait(f"agent://{crew}/a", {"resume": crew}) for crew in crews])
            if not delivered.wait(600):
                raise RuntimeError(f"{len(crews)} resumed crews did not all get their message within 600 s")
            for crew in crews:
                sup.wait_finished(crew, timeout=60)
            return len(crews) / (time.perf_counter() - started)
        finally:
            sup.stop()
            rt.stop()


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


class _LangGraph:
    """``paused`` threads paused at ``interrupt()`` in a ``SqliteSaver`` store; each
    :meth:`round` a restart (a new connection and compiled graph) timing resumes."""

    name = "langgraph"

    def __init__(self, directory: str, paused: int) -> None:
        self.db = os.path.join(directory, f"langgraph-{paused}.db")
        self.ids = [f"t{i:07d}" for i in range(paused)]
        conn = sqlite3.connect(self.db, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            app = _graph(conn)
            app.invoke({"value": ""}, {"configurable": {"thread_id": _TEMPLATE_THREAD}})
            conn.execute("BEGIN")
            _copy_thread(conn, self.ids)
            conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (_TEMPLATE_THREAD,))
            conn.execute("DELETE FROM writes WHERE thread_id = ?", (_TEMPLATE_THREAD,))
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        self.disk = _disk(self.db) / paused

    def _timed(self, threads: list[str]) -> list[float]:
        from langgraph.types import Command

        conn = sqlite3.connect(self.db, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous = FULL")
            app = _graph(conn)
            latencies = []
            for thread in threads:
                started = time.perf_counter()
                result = app.invoke(Command(resume="go"), {"configurable": {"thread_id": thread}})
                latencies.append(time.perf_counter() - started)
                if result.get("value") != "go":
                    raise RuntimeError(f"thread {thread} resumed to {result!r}")
            return latencies
        finally:
            conn.close()

    def round(self, threads: list[str]) -> list[float]:
        return self._timed(threads)

    def burst(self, threads: list[str]) -> float:
        """Resumes per second, one ``invoke`` after the other."""
        return len(threads) / sum(self._timed(threads))


# -- the suite ------------------------------------------------------------------------


def _measure(sides: list[Any], paused: int, samples: int, burst: int, rounds: int) -> dict[str, float]:
    """The rounds of every side interleaved (side A's round, side B's, then A's again),
    so that both see the same moments of a loaded machine; the ratios are taken per
    round and their median reported."""
    p99s: dict[str, list[float]] = {side.name: [] for side in sides}
    firsts: dict[str, list[float]] = {side.name: [] for side in sides}
    ratios: list[float] = []
    for round_ in range(rounds):
        for side in sides:
            progress(f"{side.name} with {paused:,} paused: round {round_ + 1} of {rounds}")
            latencies = side.round(side.ids[round_ * samples : (round_ + 1) * samples])
            p99s[side.name].append(_pct(latencies, 0.99) * 1000)
            firsts[side.name].append(latencies[0] * 1000)
        if len(sides) == 2:
            ratios.append(p99s["orkeon"][-1] / p99s["langgraph"][-1])
    figures: dict[str, float] = {}
    for side in sides:
        name, rest = side.name, side.ids[rounds * samples : rounds * samples + burst]
        progress(f"{name} with {paused:,} paused: {burst:,} back to back")
        figures[f"{name}_resume_per_s_{paused}"] = side.burst(rest)
        figures[f"{name}_resume_p99_ms_{paused}"] = statistics.median(p99s[name])
        figures[f"{name}_resume_p99_min_ms_{paused}"] = min(p99s[name])
        figures[f"{name}_resume_p99_max_ms_{paused}"] = max(p99s[name])
        figures[f"{name}_first_resume_ms_{paused}"] = statistics.median(firsts[name])
        figures[f"{name}_disk_bytes_per_paused_{paused}"] = side.disk
    if ratios:
        figures[f"resume_throughput_vs_langgraph_{paused}"] = (
            figures[f"orkeon_resume_per_s_{paused}"] / figures[f"langgraph_resume_per_s_{paused}"]
        )
        figures[f"resume_p99_vs_langgraph_{paused}"] = statistics.median(ratios)
        figures[f"resume_p99_vs_langgraph_min_{paused}"] = min(ratios)
        figures[f"resume_p99_vs_langgraph_max_{paused}"] = max(ratios)
        figures[f"disk_per_paused_vs_langgraph_{paused}"] = (
            figures[f"orkeon_disk_bytes_per_paused_{paused}"] / figures[f"langgraph_disk_bytes_per_paused_{paused}"]
        )
    return figures


@register("pauseresume")
def bench_pause_resume(quick: bool) -> BenchResult:
    sizes, samples, burst, rounds = ((200, 1_000), 30, 100, 3) if quick else ((2_000, 20_000), 200, 1_000, 5)
    if rounds * samples + burst > min(sizes):
        raise ValueError(f"{rounds} rounds of {samples} resumes and a burst of {burst} need more paused crews")
    peer = langgraph_available()
    figures: dict[str, float] = {}
    directory = scratch_directory("orkeon-bench-pauseresume-")
    try:
        with info_logging():
            for paused in sizes:
                sides: list[Any] = [_Orkeon(directory, paused)]
                if peer:
                    sides.append(_LangGraph(directory, paused))
                figures.update(_measure(sides, paused, samples, burst, rounds))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    units = {}
    for key in figures:
        units[key] = (
            "resumes/s" if "_per_s_" in key else "ms" if "_ms_" in key else "bytes" if "bytes" in key else "ratio"
        )
    notes = (
        f"{rounds} rounds (each a restart, the two sides' rounds interleaved) of {samples} resumes one at a time "
        f"(p99: the rounds' median; the ratio: the median of the rounds' ratios), then {burst:,} back to back, at "
        f"{' and '.join(f'{n:,}' for n in sizes)} paused; SQLite WAL, synchronous=FULL on both sides"
    )
    if not peer:
        notes += (
            "; LangGraph rows SKIPPED: langgraph and langgraph-checkpoint-sqlite are not installed "
            "(pip install 'orkeon-actors[bench]')"
        )
    return BenchResult("pauseresume", figures, units, notes=notes)
