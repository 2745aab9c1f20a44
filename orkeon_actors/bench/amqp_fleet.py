"""The hub's own rows of ``orkeon bench amqp``, measured across host processes.

Every host is a :class:`~orkeon_actors.fleet.host_process.HostProcess`: a child process
with its own store and host id on the bench's scratch vhost, all sharing one fleet keys
file. Timestamps taken in different processes are compared directly: ``time.monotonic``
(and ``time.perf_counter``, the same ``CLOCK_MONOTONIC`` in CPython on Linux) is one
system-wide clock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import attrs

from orkeon_actors.bench.amqp_crews import EXPIRING
from orkeon_actors.fleet.host_process import HostProcess, write_keys
from orkeon_actors.testing import wait_until

__all__ = [
    "POST_THREADS",
    "WAKE_POST_THREADS",
    "HubFigures",
    "MachineWatch",
    "broker_pids",
    "WakeFigures",
    "busy_fraction",
    "cpu_seconds",
    "expiry_rate",
    "hub_rows",
    "machine_ticks",
    "pid_cpu_seconds",
    "start_hosts",
    "wake_latency_ms",
    "wake_rate",
]

POST_THREADS = 16
"""Threads of host A posting at once (each ``post`` returns on the broker's confirm)."""
SINK = "agent://bench-sink/consumer"
CREWS = "orkeon_actors.bench.amqp_crews:bench_factories"
RESPONDER = "agent://bench-rpc/responder"
PRESENCE = (0.5, 30.0)
"""Heartbeat interval and TTL (seconds) of the bench's hosts: a TTL of 5 s let a
worker's mailboxes lapse from the poster's view at a load average of 27 (the poster
then got ``MailboxNotFoundError`` mid-run); the bench measures wakes, not presence."""
SPAWN_TIMEOUT = 600.0
"""Seconds a host may take to spawn its share of crews and put them to sleep (1,000
crews took over a minute on a 2-core machine at a load average of 12)."""


def cpu_seconds(hosts: list[HostProcess]) -> float:
    """CPU seconds (user + system) the host processes used so far, from
    ``/proc/<pid>/stat`` (Linux; ``OSError`` elsewhere: the bench needs it)."""
    return pid_cpu_seconds([host.pid for host in hosts if host.pid is not None], missing_ok=False)


def pid_cpu_seconds(pids: list[int], *, missing_ok: bool = True) -> float:
    """CPU seconds (user + system) processes ``pids`` used so far (``/proc/<pid>/stat``);
    one that is gone counts 0 when ``missing_ok``, else raises ``OSError``."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            if not missing_ok:
                raise
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int]:
    """``(busy, total)`` clock ticks of every core of the machine so far, from
    ``/proc/stat`` (every process: the broker's, the bench's and anything else running)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the machine's cores busy between two :func:`machine_ticks` (1.0: all
    of them, all the time)."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def broker_pids() -> list[int]:
    """The processes of the local broker's Erlang VM (``beam.smp``), by name in ``/proc``
    (empty if the broker runs elsewhere: its CPU is then not on this machine's cores)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as comm:
                    if comm.read().strip() == "beam.smp":
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


class MachineWatch:
    """Around a measured window: the share of the machine's cores busy (every process)
    and the broker's CPU seconds (:func:`broker_pids`). :meth:`start`, then :meth:`stop`."""

    def __init__(self) -> None:
        self._pids = broker_pids()
        self._machine = machine_ticks()
        self._broker = 0.0
        self.cores_busy = 0.0
        self.broker_cpu_s = 0.0

    def start(self) -> None:
        self._machine = machine_ticks()
        self._broker = pid_cpu_seconds(self._pids)

    def stop(self) -> None:
        self.cores_busy = busy_fraction(self._machine, machine_ticks())
        self.broker_cpu_s = pid_cpu_seconds(self._pids) - self._broker


@attrs.frozen
class HubFigures:
    """What :func:`hub_rows` measures: rates, and the CPU microseconds of hosts A and B
    together per message (post) and per round trip (send/reply)."""

    post_per_s: float
    send_per_s: float
    post_cpu_us: float
    send_cpu_us: float
    post_cores_busy: float
    """The share of the machine's cores busy over the post window."""
    post_broker_cpu_us: float
    """The broker's CPU microseconds per message over the post window."""
    hold_batch: float
    """Deliveries per inbox batch on host B over the post window (what its durable hold
    commits at once)."""
    post_switches: float
    """Context switches of hosts A and B together per message over the post window."""
    send_switches: float
    """The same per round trip over the send/reply window."""


def start_hosts(url: str, directory: Path, names: list[str]) -> list[HostProcess]:
    """Start one host process per name (stores and keys under ``directory``)."""
    keys = directory / "fleet-keys.json"
    write_keys(keys, names)
    hosts: list[HostProcess] = []
    try:
        for name in names:
            host = HostProcess(name, directory / f"{name}.db", url=url, keys_file=keys, presence=PRESENCE)
            hosts.append(host.start())
            host.call("load_ops", ops="orkeon_actors.bench.amqp_crews:HOST_OPS")
    except BaseException:
        for host in hosts:
            host.stop()
        raise
    return hosts


def _switches(hosts: list[HostProcess]) -> int:
    return sum(int(host.call("switches")) for host in hosts)


def _announced(observer: HostProcess, host: str, address: str) -> None:
    wait_until(lambda: [host, address] in observer.call("roster"), timeout=30, what=f"{address} on the roster")


def hub_rows(url: str, directory: Path, count: int, requests: int) -> HubFigures:
    """Post/receive and send/reply from host A to host B, with their CPU cost."""
    a, b = start_hosts(url, directory, ["bench-a", "bench-b"])
    try:
        b.call("register", address=SINK)
        b.call("register", address=RESPONDER)
        _announced(a, "bench-b", SINK)
        _announced(a, "bench-b", RESPONDER)
        cpu, watch, batches = cpu_seconds([a, b]), MachineWatch(), b.call("inbox_batches")
        switches = _switches([a, b])
        watch.start()
        drained = b.call_async("drain", address=SINK, count=count, timeout=600)
        posted = a.call("post_many", within=600, to=SINK, count=count, threads=POST_THREADS)
        last = drained.result(600)["last_at"]
        watch.stop()
        post_rate = count / (last - posted["started_at"])
        post_cpu = (cpu_seconds([a, b]) - cpu) / count * 1e6
        after = b.call("inbox_batches")
        hold_batch = (after[1] - batches[1]) / max(1, after[0] - batches[0])
        post_switches = (_switches([a, b]) - switches) / count
        cpu, switches = cpu_seconds([a, b]), _switches([a, b])
        served = b.call_async("serve", address=RESPONDER, count=requests, crew="bench-rpc", agent="responder")
        elapsed = a.call("send_many", within=600, to=RESPONDER, count=requests, timeout=30)
        served.result(60)
        send_cpu = (cpu_seconds([a, b]) - cpu) / requests * 1e6
        send_switches = (_switches([a, b]) - switches) / requests
        broker_us = watch.broker_cpu_s / count * 1e6
        return HubFigures(
            post_rate,
            requests / elapsed,
            post_cpu,
            send_cpu,
            watch.cores_busy,
            broker_us,
            hold_batch,
            post_switches,
            send_switches,
        )
    finally:
        a.stop()
        b.stop()


def _mailboxes(crews: list[str]) -> list[str]:
    return [f"agent://{crew}/a" for crew in crews]


def _all_announced(observer: HostProcess, where: dict[str, str]) -> None:
    def seen() -> bool:
        roster = {(host, entity) for host, entity in observer.call("roster")}
        return all((host, entity) in roster for entity, host in where.items())

    wait_until(seen, timeout=60, what="every sleeping crew on the roster")


def wake_latency_ms(url: str, directory: Path, crews: int) -> list[float]:
    """Latencies (ms) of ``crews`` crews asleep on host B, each woken in turn by a post
    from host A: from just before ``post`` on A to B's agent receiving the message."""
    a, b = start_hosts(url, directory, ["lat-a", "lat-b"])
    try:
        b.call("serve_crews", factories=CREWS)
        ids = [f"lat{i}" for i in range(crews)]
        b.call("sleepers", within=600, kind="forever", crews=ids, timeout=SPAWN_TIMEOUT)
        _all_announced(a, {box: "lat-b" for box in _mailboxes(ids)})
        latencies = []
        for crew, box in zip(ids, _mailboxes(ids), strict=True):
            b.call("expect", crews=[crew])
            (before,) = a.call("post_timed", to=[box])
            delivered = b.call("delivered", crews=[crew], timeout=60)[crew]
            latencies.append((delivered - before) * 1000)
        return latencies
    finally:
        a.stop()
        b.stop()


def _split(crews: list[str], parts: int) -> list[list[str]]:
    return [crews[i::parts] for i in range(parts)]


WAKE_POST_THREADS = 128
"""Threads of host A posting the wakes at once. A post returns on the broker's confirm,
which for a persistent message comes once the worker host kept it and acknowledged it
(a store commit there), so the posts in flight bound the rate to ``threads / latency``
whatever the worker hosts could do: with 16 (:data:`POST_THREADS`) two worker hosts
woke no more crews per second than one. 128 in flight keep both worker hosts' inbox
lanes in full batches; the poster's own CPU per post is reported beside the rate."""


@attrs.frozen
class WakeFigures:
    """What :func:`wake_rate` measures: crews woken per second, the CPU microseconds per
    wake of the worker hosts together (constant from one host to two when the work per
    wake does not grow), and host A's CPU microseconds per post."""

    per_s: float
    worker_cpu_us: float
    poster_cpu_us: float
    cores_busy: float
    """The share of the machine's cores busy over the window (every process's work)."""


def wake_rate(url: str, directory: Path, workers: int, crews: int, threads: int = WAKE_POST_THREADS) -> WakeFigures:
    """Crews/s woken by posts from host A (``threads`` posting at once) when ``crews``
    sleeping crews are shared by ``workers`` worker hosts: from A's first post to the
    last crew's delivery, with the CPU the worker hosts and A spent meanwhile."""
    names = ["wr-a", *(f"wr-w{i}" for i in range(workers))]
    poster, *work = start_hosts(url, directory, names)
    try:
        shares = _split([f"wr{i}" for i in range(crews)], workers)
        for host in work:
            host.call("serve_crews", factories=CREWS)
        pending = [
            h.call_async("sleepers", kind="forever", crews=mine, timeout=SPAWN_TIMEOUT)
            for h, mine in zip(work, shares, strict=True)
        ]
        for future in pending:
            future.result(SPAWN_TIMEOUT)
        where = {box: host.host_id for host, mine in zip(work, shares, strict=True) for box in _mailboxes(mine)}
        _all_announced(poster, where)
        for host, mine in zip(work, shares, strict=True):
            host.call("expect", crews=mine)
        done = [h.call_async("delivered", crews=mine, timeout=600) for h, mine in zip(work, shares, strict=True)]
        worker_cpu, poster_cpu, machine = cpu_seconds(work), cpu_seconds([poster]), machine_ticks()
        started = poster.call("post_all", within=600, to=list(where), threads=threads)
        last = max(max(future.result(600).values()) for future in done)
        worker_us = (cpu_seconds(work) - worker_cpu) / crews * 1e6
        poster_us = (cpu_seconds([poster]) - poster_cpu) / crews * 1e6
        busy = busy_fraction(machine, machine_ticks())
        return WakeFigures(float(crews / (last - started)), worker_us, poster_us, busy)
    finally:
        for host in (poster, *work):
            host.stop()


def expiry_rate(url: str, directory: Path, workers: int, crews: int) -> tuple[float, float, float]:
    """Crews/s whose waits expire at one instant ``T``, shared by ``workers`` hosts: each
    crew asleep (its wait in its host's durable wait index) wakes with its timeout as its
    tool result; ``crews`` over the time from ``T`` to the last such delivery. Also the
    CPU microseconds per expiry of the worker hosts together, from ``T`` to that last
    delivery: equal with one and with two hosts, a scale-out short of 2x is the
    machine's cores (shared with the broker and the bench), not extra work; and the
    share of the machine's cores busy over that window (:func:`busy_fraction`)."""
    names = [f"ex-w{i}" for i in range(workers)]
    work = start_hosts(url, directory, names)
    try:
        shares = _split([f"ex{i}" for i in range(crews)], workers)
        lead_s = 5.0 + 0.08 * len(shares[0])  # 1,000 crews took over 60 s to spawn at a load of 12
        at_ms = int(time.time() * 1000 + lead_s * 1000)
        at_perf = time.perf_counter() + (at_ms / 1000 - time.time())
        for host in work:
            host.call("serve_crews", factories=CREWS, expire_at_ms=at_ms)
        for host, mine in zip(work, shares, strict=True):
            host.call("expect", crews=mine)
        pending = [
            h.call_async("sleepers", kind=EXPIRING, crews=mine, timeout=SPAWN_TIMEOUT)
            for h, mine in zip(work, shares, strict=True)
        ]
        for future in pending:
            future.result(600)
        if time.perf_counter() >= at_perf:
            raise RuntimeError(f"the crews were not all asleep {lead_s:.1f} s after being spawned: lengthen the lead")
        time.sleep(max(0.0, at_perf - time.perf_counter()))  # the bench's own thread, not a test
        cpu, machine = cpu_seconds(work), machine_ticks()
        done = [h.call_async("delivered", crews=mine, timeout=600) for h, mine in zip(work, shares, strict=True)]
        last = max(max(future.result(600).values()) for future in done)
        busy = busy_fraction(machine, machine_ticks())
        return float(crews / (last - at_perf)), (cpu_seconds(work) - cpu) / crews * 1e6, busy
    finally:
        for host in work:
            host.stop()
