"""``orkeon bench store``: durable post throughput beside raw apsw, measured in one run.

* **durable posts**: ``THREADS`` threads each post to one mailbox of a hub opened with
  ``Runtime.start(store=...)`` (WAL, ``synchronous=FULL``), each thread blocking on its
  own ``post`` until its transaction committed. Group commit only pays off with
  concurrency: the writer commits whatever the threads queued meanwhile in one
  transaction. The writer's batch sizes are recorded.
* **raw apsw**: the same rows (the ``mailboxes`` rows those posts wrote and, the
  posters being agents, their sent-history rows, nodes and heads; same columns, same
  schema and indexes), inserted with ``executemany`` in transactions of exactly the
  batch sizes the writer achieved, on a connection with the same durability, in a file
  of the same directory (same disk). No hub, no actor, no thread.

Both files live in a temporary directory under the current working directory, removed
afterwards. Target (issue #6): ``durable_post_vs_raw`` >= 0.50. Latencies are the
time one ``post`` call took, as seen by its caller.
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import apsw

from orkeon_actors.bench.context import progress, scratch_directory
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.runtime import Runtime
from orkeon_actors.store import SqliteEventHub, StoreConfig
from orkeon_actors.store.connection import open_connection
from orkeon_actors.store.schema import migrate
from orkeon_actors.timed_threads import run_together

__all__ = ["durable_posts", "raw_batched_inserts"]

THREADS = 8
MAILBOX = "agent://bench-store/sink"
_ROWS = (
    "SELECT mailbox_address, message_id, payload, metadata, received_at, seq, topic, source_crew_id, "
    "source_agent_id, target_crew_id, correlation_id, published_at, schema_id FROM mailboxes ORDER BY seq"
)
_SENT_ROWS = (
    "SELECT r.sender, r.seq, r.message_id, r.recipient, r.sent_ms, r.idempotency_key, r.content, r.record,"
    " n.row_hash, n.link, n.version, n.epoch_ms FROM sent_rows r JOIN sent_nodes n USING (sender, seq)"
)
_RAW_SENT_ROW = (
    "INSERT INTO sent_rows (sender, seq, message_id, recipient, sent_ms, idempotency_key, content, record)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_RAW_SENT_NODE = "INSERT INTO sent_nodes (sender, seq, row_hash, link, version, epoch_ms) VALUES (?, ?, ?, ?, ?, ?)"
_RAW_SENT_HEAD = (
    "INSERT INTO sent_heads (sender, count, tip, since_ms, version) VALUES (?, ?, ?, 0, ?)"
    " ON CONFLICT (sender) DO UPDATE SET count = excluded.count, tip = excluded.tip, version = excluded.version"
)
_RAW_INSERT = (
    "INSERT INTO mailboxes (mailbox_address, message_id, payload, metadata, received_at, seq, topic, "
    "source_crew_id, source_agent_id, target_crew_id, correlation_id, published_at, schema_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def durable_posts(
    directory: str, threads: int, per_thread: int
) -> tuple[float, list[float], Counter[int], list[tuple[Any, ...]]]:
    """(posts/s, per-post latencies in s, the writer's batch sizes, the rows written)."""
    path = os.path.join(directory, "durable.db")
    with Runtime.start(store=StoreConfig(path)) as rt:
        hub = rt.hub
        assert isinstance(hub, SqliteEventHub)
        hub.register_mailbox(MAILBOX)
        latencies: list[list[float]] = [[] for _ in range(threads)]
        payload = b'{"order":42,"amount":"12.50","currency":"EUR"}'

        def poster(index: int) -> Callable[[], None]:
            client = hub.bind(f"bench-poster-{index}", "poster")
            mine = latencies[index]
            clock = time.perf_counter

            def post_all() -> None:
                for _ in range(per_thread):
                    began = clock()
                    client.post(MAILBOX, payload)
                    mine.append(clock() - began)

            return post_all

        before = Counter(hub.writer.stats.batch_sizes)
        elapsed = run_together([functools.partial(poster, i) for i in range(threads)], name="bench-poster").seconds
        batches = hub.writer.stats.batch_sizes - before
        with hub.readers.connection() as conn:
            rows = [tuple(row) for row in conn.execute(_ROWS)]
            sent = {str(row[2]): tuple(row) for row in conn.execute(_SENT_ROWS)}
        # Each post's sent row (the agents' history, on by default) rides with its mailbox row.
        rows = [(*row, sent.get(str(row[1]))) for row in rows]
    flat = [latency for mine in latencies for latency in mine]
    return threads * per_thread / elapsed, flat, batches, rows


def raw_batched_inserts(directory: str, rows: list[tuple[Any, ...]], batches: Counter[int]) -> float:
    """Rows/s of plain apsw: ``BEGIN; executemany(INSERT ...); COMMIT`` per batch, with
    the batch sizes of ``batches`` (smallest first), WAL and ``synchronous=FULL``. A row
    carrying its sender's history (an agent's post) also writes its sent row, ledger node
    and the sender's head, as the durable post did."""
    config = StoreConfig(os.path.join(directory, "raw.db"))
    conn = open_connection(config)
    try:
        migrate(conn, config.path)
        sizes = sorted(batches.elements())
        plan: list[list[tuple[Any, ...]]] = []
        cursor = 0
        for size in sizes:
            plan.append(rows[cursor : cursor + size])
            cursor += size
        plan = [chunk for chunk in plan if chunk]
        written = sum(len(chunk) for chunk in plan)
        began = time.perf_counter()
        for chunk in plan:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_RAW_INSERT, [row[:13] for row in chunk])
            history = [row[13] for row in chunk if row[13] is not None]
            if history:
                conn.executemany(_RAW_SENT_ROW, [h[:8] for h in history])
                conn.executemany(_RAW_SENT_NODE, [(h[0], h[1], h[8], h[9], h[10], h[11]) for h in history])
                heads = {h[0]: (h[0], h[1], h[9], h[10]) for h in history}
                conn.executemany(_RAW_SENT_HEAD, list(heads.values()))
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - began
    finally:
        conn.close()
    return written / elapsed


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


@register("store")
def bench_store(quick: bool) -> BenchResult:
    per_thread = 250 if quick else 1000
    rounds = 3 if quick else 5
    best_durable = best_raw = 0.0
    latencies: list[float] = []
    batch_means: list[float] = []
    for index in range(rounds):
        progress(f"round {index + 1}/{rounds}")
        directory = scratch_directory("orkeon-bench-store-")
        try:
            durable, run_latencies, batches, rows = durable_posts(directory, THREADS, per_thread)
            raw = raw_batched_inserts(directory, rows, batches)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        batch_means.append(sum(batches.elements()) / max(1, sum(batches.values())))
        if durable > best_durable:
            best_durable, latencies = durable, run_latencies
        best_raw = max(best_raw, raw)
    figures = {
        "raw_apsw_batched_inserts_per_s": best_raw,
        "durable_post_per_s": best_durable,
        "durable_post_vs_raw": best_durable / best_raw,
        "post_latency_p50_ms": 1000 * statistics.median(latencies),
        "post_latency_p99_ms": 1000 * _percentile(latencies, 0.99),
        "mean_batch": statistics.mean(batch_means),
    }
    units = {
        "raw_apsw_batched_inserts_per_s": "rows/s (WAL, synchronous=FULL)",
        "durable_post_per_s": f"posts/s ({THREADS} posting threads)",
        "durable_post_vs_raw": "ratio (target >= 0.50)",
        "post_latency_p50_ms": "ms",
        "post_latency_p99_ms": "ms",
        "mean_batch": "posts per transaction",
    }
    return BenchResult(
        "store",
        figures,
        units,
        notes=(
            f"best of {rounds} rounds, each durable then raw; {THREADS} threads x {per_thread} posts to one "
            f"mailbox, synchronous=FULL; raw = the same rows in the same batch sizes on the same disk "
            f"({os.getcwd()}); sqlite {apsw.sqlite_lib_version()}"
        ),
    )
