"""``orkeon bench history``: what the sent history costs and how fast it reads
(sender-owned history requirements, MESSAGE-R08, R10).

* **catalog read (R10)**: a store generated through the hub with ``AGENTS`` (557)
  agents, each with real sent rows (posts to other agents' mailboxes, so recipient
  mailboxes hold varied depths) and one recipient mailbox made structurally unreadable
  (its row's metadata is not JSON). Then, as whole processes (``python -m
  orkeon_actors.cli.main ...``), one warm-up and ``READS`` timed runs each of ``orkeon
  message sent --json`` and ``orkeon message ls --json`` for the same agent. Targets:
  ``sent_p95_s`` < 1.0 and ``sent_vs_ls_p95`` < 2.0. ``unreadable_ls_refused`` is 1 when
  ``ls`` of the broken mailbox fails while ``sent`` of its sender still succeeds (the
  read never scans recipient mailboxes).
* **write cost per send (R08)**: the history's own write work, one send per
  transaction on a plain connection (``synchronous=NORMAL``: no fsync, so the figure is
  the work, not the disk), after 10 and after 100,000 prior rows of the same sender
  (generated with the same codec and ledger). It is the process's CPU time per send
  (what the work costs, not how long a shared core made it wait), in rounds that
  alternate between the two stores, the best round of each.
  ``write_cost_ratio_100k_vs_10`` ≈ 1 is constant work (target < 1.5).
* **an agent's post, mailbox vs topic**: one agent posting and waiting for each post
  (``synchronous=FULL``) to a mailbox (the copy and the sent row in one transaction)
  and to ``topic://`` (the staged protocol: intent, routing, completion), rounds
  interleaved, best of each.
* **durable post (the history's cost)**: ``THREADS`` agents posting (the ``orkeon bench
  store`` workload) on stores with ``sent_history`` off and on, rounds interleaved, best
  of each: ``post_history_on_vs_off`` (target >= 0.75).
* **durable send**: ``THREADS`` requester agents, each sending to its own responder
  agent and waiting for the reply, history off and on, rounds interleaved, best of
  each: ``send_history_on_vs_off`` (target >= 0.75).
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import apsw

from orkeon_actors.bench.context import progress, scratch_directory
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.history.endpoint import agent_endpoint, endpoint_of
from orkeon_actors.history.records import SendKind, SentIntent
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.runtime import Runtime
from orkeon_actors.store import SqliteEventHub, StoreConfig, sent_rows
from orkeon_actors.store.config import Durability
from orkeon_actors.store.connection import open_connection
from orkeon_actors.store.mailboxes import RegistryCache, register_many
from orkeon_actors.store.schema import migrate
from orkeon_actors.store.sent_group import PreparedSend, SentGroup
from orkeon_actors.timed_threads import run_together

__all__ = [
    "agent_post_latency",
    "catalog_reads",
    "durable_post_rate",
    "durable_send_rate",
    "write_cost_per_send",
    "write_costs",
]

AGENTS = 557
READS = 10
THREADS = 8


def _agent(i: int) -> str:
    return f"agent://crew-{i % 37}/agent-{i}"


def generate_catalog(path: str, agents: int, sends_per_agent: int) -> tuple[str, str]:
    """Build the catalog store; returns the address of the agent whose reads are timed
    and the address of the recipient mailbox made unreadable."""
    with Runtime.start(store=StoreConfig(path, durability=Durability.NORMAL)) as rt:
        hub = rt.hub
        assert isinstance(hub, SqliteEventHub)
        hub.register_mailboxes([_agent(i) for i in range(agents)])

        def send_from(indices: range) -> None:
            for i in indices:
                address = MailboxAddress.parse(_agent(i))
                assert address.crew_id is not None and address.agent_id is not None
                client = hub.bind(address.crew_id, address.agent_id)
                for k in range(sends_per_agent):
                    # Varied depth: low-numbered agents receive far more than the others.
                    to = _agent(int(agents * (k / sends_per_agent) ** 3) % agents)
                    client.post(to, {"from": i, "k": k, "text": "the quarterly numbers are in"})

        step = math.ceil(agents / THREADS)
        workers = [
            threading.Thread(target=send_from, args=(range(s, min(agents, s + step)),)) for s in range(0, agents, step)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    conn = apsw.Connection(path)
    try:
        row = conn.execute(
            "SELECT mailbox_address FROM mailboxes WHERE mailbox_address != ? GROUP BY 1 ORDER BY count(*) LIMIT 1",
            (_agent(0),),
        ).fetchone()
        assert row is not None
        broken = str(row[0])
        conn.execute(
            "UPDATE mailboxes SET metadata = 'not json {' WHERE mailbox_address = ? "
            "AND seq = (SELECT min(seq) FROM mailboxes WHERE mailbox_address = ?)",
            (broken, broken),
        )
    finally:
        conn.close()
    return _agent(0), broken


def _timed(argv: list[str]) -> tuple[float, int]:
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False)
    return time.perf_counter() - began, done.returncode


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def catalog_reads(directory: str, agents: int, sends_per_agent: int, reads: int) -> dict[str, float]:
    path = os.path.join(directory, "catalog.db")
    sender, broken = generate_catalog(path, agents, sends_per_agent)
    cli = [sys.executable, "-m", "orkeon_actors.cli.main", "message"]
    sent = [*cli, "sent", sender, "--json", "--store", path]
    ls = [*cli, "ls", sender, "--json", "--store", path]
    for argv in (sent, ls):
        _, code = _timed(argv)  # warm-up
        if code != 0:
            raise RuntimeError(f"{' '.join(argv)} failed with status {code}")
    start = [sys.executable, "-m", "orkeon_actors.cli.main", "--version"]
    sent_times, ls_times, start_times = [], [], []
    for _ in range(reads):
        sent_times.append(_timed(sent)[0])
        ls_times.append(_timed(ls)[0])
        start_times.append(_timed(start)[0])
    owner = MailboxAddress.parse(broken)
    _, ls_broken = _timed([*cli, "ls", broken, "--json", "--store", path])
    _, sent_of_broken = _timed([*cli, "sent", str(owner), "--json", "--store", path])
    return {
        "agents": float(agents),
        "sent_p95_s": _p95(sent_times),
        "ls_p95_s": _p95(ls_times),
        "sent_vs_ls_p95": _p95(sent_times) / _p95(ls_times),
        "cli_start_p95_s": _p95(start_times),
        "unreadable_ls_refused": float(ls_broken != 0 and sent_of_broken == 0),
    }


def _intent(sender: tuple[str, str], n: int) -> tuple[SentIntent, MailboxAddress]:
    to = MailboxAddress.parse("agent://bench-history/sink")
    message = Message(
        MessageId.new(),
        "_system.post",
        CrewId(sender[0]),
        datetime.now(UTC),
        b'{"order":42,"amount":"12.50","currency":"EUR","n":%d}' % n,
        {},
        AgentId(sender[1]),
        to.crew_id,
        to,
    )
    endpoint = agent_endpoint(CrewId(sender[0]), AgentId(sender[1]))
    return SentIntent(SendKind.POST, endpoint, endpoint_of(to), None, message, 0), to


_WRITER = ("bench-history", "writer")


class _CostStore:
    """A store whose sender ``bench-history/writer`` already has ``prior`` rows."""

    def __init__(self, directory: str, prior: int) -> None:
        config = StoreConfig(os.path.join(directory, f"cost-{prior}.db"), durability=Durability.NORMAL)
        self.conn = open_connection(config)
        migrate(self.conn, config.path)
        counter = iter(range(1, 10**9))
        self.conn.execute("BEGIN")
        epoch = sent_rows.ensure_index(self.conn, int(time.time() * 1000))
        self.group = SentGroup(RegistryCache(), lambda: next(counter), epoch)
        self.sent = prior
        register_many(self.conn, ["agent://bench-history/sink"], "2026-01-01T00:00:00.000000Z")
        for start in range(0, prior, 1000):
            self.group.apply(self.conn, self._next(min(1000, prior - start)))
        self.conn.execute("COMMIT")

    def _next(self, count: int) -> list[PreparedSend]:
        sends = [PreparedSend.of(*_intent(_WRITER, self.sent + n)) for n in range(count)]
        self.sent += count
        return sends

    def cpu_per_send(self, measured: int) -> float:
        """CPU seconds per send over ``measured`` sends, one transaction each."""
        sends = self._next(measured)
        began = time.process_time()
        for send in sends:
            self.conn.execute("BEGIN IMMEDIATE")
            self.group.apply(self.conn, [send])
            self.conn.execute("COMMIT")
        return (time.process_time() - began) / measured

    def close(self) -> None:
        self.conn.close()


def write_costs(directory: str, priors: tuple[int, ...], measured: int, rounds: int) -> dict[int, float]:
    """CPU seconds of history write work per send (one send per transaction) after each
    of ``priors`` rows of the same sender: ``rounds`` rounds of ``measured`` sends that
    alternate between the stores, the best round of each."""
    stores = [_CostStore(directory, prior) for prior in priors]
    try:
        best = dict.fromkeys(priors, math.inf)
        for _ in range(rounds):
            for prior, store in zip(priors, stores, strict=True):
                best[prior] = min(best[prior], store.cpu_per_send(measured))
        return best
    finally:
        for store in stores:
            store.close()


def write_cost_per_send(directory: str, prior: int, measured: int) -> float:
    """CPU seconds of history write work per send after ``prior`` rows (one round)."""
    return write_costs(directory, (prior,), measured, 1)[prior]


def durable_post_rate(directory: str, history: bool, per_thread: int) -> float:
    path = os.path.join(directory, f"posts-{history}-{time.monotonic_ns()}.db")
    with Runtime.start(store=StoreConfig(path, sent_history=history)) as rt:
        hub = rt.hub
        hub.register_mailbox("agent://bench-history/sink")

        def poster(index: int) -> Callable[[], None]:
            client = hub.bind(f"bench-poster-{index}", "poster")

            def post_all() -> None:
                for _ in range(per_thread):
                    client.post("agent://bench-history/sink", b'{"order":42,"amount":"12.50","currency":"EUR"}')

            return post_all

        timed = run_together([functools.partial(poster, i) for i in range(THREADS)], name="bench-poster")
        return THREADS * per_thread / timed.seconds


def durable_send_rate(directory: str, history: bool, per_thread: int) -> float:
    """Requests answered per second: ``THREADS`` agent pairs, each requester sending
    (``send``: post the request, wait for the reply) to its own responder agent, which
    replies to each; with the history on, both the request and the reply are rows."""
    path = os.path.join(directory, f"sends-{history}-{time.monotonic_ns()}.db")
    with Runtime.start(store=StoreConfig(path, sent_history=history)) as rt:
        hub = rt.hub
        desks = [hub.register_mailbox(f"agent://bench-desk-{i}/desk") for i in range(THREADS)]

        def serve(index: int) -> None:
            responder = hub.bind(f"bench-desk-{index}", "responder")
            with desks[index].reader() as reader:
                for _ in range(per_thread):
                    request = reader.receive()
                    assert request.correlation_id is not None
                    responder.reply(request.correlation_id, b'{"ok":true}')

        servers = [threading.Thread(target=serve, args=(i,), daemon=True) for i in range(THREADS)]
        for server in servers:
            server.start()

        def requester(index: int) -> Callable[[], None]:
            client = hub.bind(f"bench-asker-{index}", "asker")

            def send_all() -> None:
                for _ in range(per_thread):
                    client.send(f"agent://bench-desk-{index}/desk", b'{"order":42}', timeout=60)

            return send_all

        timed = run_together([functools.partial(requester, i) for i in range(THREADS)], name="bench-asker")
        for server in servers:
            server.join(60)
        return THREADS * per_thread / timed.seconds


def agent_post_latency(directory: str, per_round: int, rounds: int) -> dict[str, float]:
    """Seconds per post of one agent waiting for each (``synchronous=FULL``): to a
    mailbox (one transaction with its sent row) and to ``topic://`` (intent, routing,
    completion: two transactions), rounds interleaved, the best of each."""
    path = os.path.join(directory, f"topic-{time.monotonic_ns()}.db")
    best = {"mailbox": math.inf, "topic": math.inf}
    with Runtime.start(store=StoreConfig(path)) as rt:
        hub = rt.hub
        hub.register_mailbox("agent://bench-history/sink")
        listener = hub.bind("bench-listener").subscribe("bench-news")
        agent = hub.bind("bench-history", "poster")
        for _ in range(rounds):
            for kind, to in (("mailbox", "agent://bench-history/sink"), ("topic", "topic://bench-news")):
                began = time.perf_counter()
                for n in range(per_round):
                    agent.post(to, {"n": n})
                best[kind] = min(best[kind], (time.perf_counter() - began) / per_round)
                listener.drain()
    return best


def _off_and_on(
    name: str, rate: Callable[[str, bool, int], float], directory: str, per_thread: int, rounds: int
) -> dict[str, float]:
    """``rate`` with the history off and on, ``rounds`` interleaved rounds, the best of
    each: ``{name}_history_off_per_s``, ``..._on_per_s`` and ``..._on_vs_off``."""
    off = on = 0.0
    for _ in range(rounds):
        off = max(off, rate(directory, False, per_thread))
        on = max(on, rate(directory, True, per_thread))
    return {f"{name}_history_off_per_s": off, f"{name}_history_on_per_s": on, f"{name}_history_on_vs_off": on / off}


@register("history")
def bench_history(quick: bool) -> BenchResult:
    directory = scratch_directory("orkeon-bench-history-")
    try:
        progress("catalog store and timed reads")
        figures = catalog_reads(directory, AGENTS, 3 if quick else 6, READS)
        progress("write cost per send")
        costs = write_costs(directory, (10, 100_000), 200 if quick else 500, 3 if quick else 5)
        small, large = costs[10], costs[100_000]
        figures["write_cost_us_at_10"] = small * 1e6
        figures["write_cost_us_at_100k"] = large * 1e6
        figures["write_cost_ratio_100k_vs_10"] = large / small
        progress("an agent's post to a mailbox and to a topic")
        latency = agent_post_latency(directory, 50 if quick else 200, 3 if quick else 5)
        figures["agent_mailbox_post_ms"] = latency["mailbox"] * 1e3
        figures["agent_topic_post_ms"] = latency["topic"] * 1e3
        progress("durable posts with the history off and on")
        figures.update(_off_and_on("post", durable_post_rate, directory, 150 if quick else 600, 2 if quick else 3))
        progress("durable sends (request and reply) with the history off and on")
        figures.update(_off_and_on("send", durable_send_rate, directory, 40 if quick else 150, 2 if quick else 3))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    units = {
        "agents": "agents in the generated store",
        "sent_p95_s": f"s, whole process, p95 of {READS} (target < 1.0)",
        "ls_p95_s": f"s, whole process, p95 of {READS}",
        "sent_vs_ls_p95": "ratio (target < 2.0)",
        "cli_start_p95_s": "s, whole process `orkeon --version`: the floor of both reads",
        "unreadable_ls_refused": "1 = ls of the broken box fails, sent of its owner does not",
        "write_cost_us_at_10": "µs CPU per send, history work, after 10 rows (best round)",
        "write_cost_us_at_100k": "µs CPU per send, history work, after 100,000 rows (best round)",
        "write_cost_ratio_100k_vs_10": "ratio (≈ 1: constant work; target < 1.5)",
        "agent_mailbox_post_ms": "ms per post to a mailbox, one agent waiting for each (best round)",
        "agent_topic_post_ms": "ms per post to topic://, one agent waiting for each (best round)",
        "post_history_off_per_s": f"posts/s, {THREADS} agents, sent_history=False",
        "post_history_on_per_s": f"posts/s, {THREADS} agents, sent_history=True",
        "post_history_on_vs_off": "ratio, same run (target >= 0.75)",
        "send_history_off_per_s": f"requests answered/s, {THREADS} agent pairs, sent_history=False",
        "send_history_on_per_s": f"requests answered/s, {THREADS} agent pairs, sent_history=True",
        "send_history_on_vs_off": "ratio, same run (target >= 0.75)",
    }
    return BenchResult(
        "history",
        figures,
        units,
        notes=(
            f"catalog: {AGENTS} agents posting through the hub (durability normal), one recipient box broken; "
            f"reads as whole processes; write cost as CPU time on a plain connection, synchronous=NORMAL, "
            f"rounds interleaved; "
            f"posts with synchronous=FULL, best of interleaved rounds; sqlite {apsw.sqlite_lib_version()}"
        ),
    )
