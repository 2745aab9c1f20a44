"""The hub's own rows of ``orkeon bench amqp``, measured across host processes.

Every host is a :class:`~orkeon_actors.fleet.host_process.HostProcess`: a child process
with its own store and host id on the bench's scratch vhost, all sharing one fleet keys
file. Timestamps taken in different processes are compared directly: ``time.monotonic``
(and ``time.perf_counter``, the same ``CLOCK_MONOTONIC`` in CPython on Linux) is one
system-wide clock.
"""

from __future__ import annotations

from pathlib import Path

from orkeon_actors.fleet.host_process import HostProcess, write_keys
from orkeon_actors.testing import wait_until

__all__ = ["POST_THREADS", "hub_rows", "start_hosts"]

POST_THREADS = 16
"""Threads of host A posting at once (each ``post`` returns on the broker's confirm)."""
SINK = "agent://bench-sink/consumer"
RESPONDER = "agent://bench-rpc/responder"


def start_hosts(url: str, directory: Path, names: list[str]) -> list[HostProcess]:
    """Start one host process per name (stores and keys under ``directory``)."""
    keys = directory / "fleet-keys.json"
    write_keys(keys, names)
    hosts: list[HostProcess] = []
    try:
        for name in names:
            host = HostProcess(name, directory / f"{name}.db", url=url, keys_file=keys, presence=(0.5, 5.0))
            hosts.append(host.start())
    except BaseException:
        for host in hosts:
            host.stop()
        raise
    return hosts


def _announced(observer: HostProcess, host: str, address: str) -> None:
    wait_until(lambda: [host, address] in observer.call("roster"), timeout=30, what=f"{address} on the roster")


def hub_rows(url: str, directory: Path, count: int, requests: int) -> tuple[float, float]:
    """``(post_receive_per_s, send_reply_per_s)`` from host A to host B."""
    a, b = start_hosts(url, directory, ["bench-a", "bench-b"])
    try:
        b.call("register", address=SINK)
        b.call("register", address=RESPONDER)
        _announced(a, "bench-b", SINK)
        _announced(a, "bench-b", RESPONDER)
        drained = b.call_async("drain", address=SINK, count=count, timeout=600)
        posted = a.call("post_many", within=600, to=SINK, count=count, threads=POST_THREADS)
        last = drained.result(600)["last_at"]
        post_rate = count / (last - posted["started_at"])
        served = b.call_async("serve", address=RESPONDER, count=requests, crew="bench-rpc", agent="responder")
        elapsed = a.call("send_many", within=600, to=RESPONDER, count=requests, timeout=30)
        served.result(60)
        return post_rate, requests / elapsed
    finally:
        a.stop()
        b.stop()
