"""The parts of ``orkeon bench lifecycle`` about scale: a burst of posts to sleeping
crews, wakes under load, what a crew costs on disk and parked in memory, and the
resident set around a mass sleep (figures defined in docs/bench.md).

* :func:`burst`: ``B1`` posts to sleeping crews one ``post`` at a time, then ``B2``
  pipelined (``post_nowait``), from one thread; rates until every woken agent got its
  message (``burst_*_per_s``) and, pipelined, until every post was committed;
* :func:`loaded_latencies`: the wake latency of ``wake_latency_p50/p99_ms``, measured
  while ``LOAD_CREWS`` other crews post (pipelined, to a mailbox drained by a reader)
  and publish as fast as two threads let them;
* :func:`disk_bytes_per_crew`: the store file's size over its sleeping crews;
* :func:`memory_child` (in a fresh process): the memory and start time of a live crew
  parked on its wait (``tracemalloc``, CPU time), and ``VmRSS`` before and after
  ``M`` live crews are put to sleep, then after :func:`give_back_memory`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, wait
from typing import Any

from loguru import logger

from orkeon_actors.actors import DEFAULT_POOL
from orkeon_actors.bench.lifecycle import DELIVERIES, FACTORIES, FOREVER_NAME
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.errors import CancelledError
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor, give_back_memory
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.message import Message
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.runtime import Runtime
from orkeon_actors.testing import wait_until

__all__ = [
    "LOAD_CREWS",
    "UNITS",
    "CrewLoad",
    "burst",
    "crew_loaded_latencies",
    "disk_bytes_per_crew",
    "loaded_latencies",
    "memory",
    "memory_child",
]

LOAD_CREWS = 1_000
"""The crews whose posts and publishes load the machine during the loaded wakes."""

IN_FLIGHT = 256
"""Posts each load thread keeps queued for the writer at most."""

UNITS = {
    "boot_disk_bytes_per_crew": "bytes",
    "wake_disk_bytes_per_crew": "bytes",
    "wake_loaded_p50_ms": "ms",
    "wake_loaded_p99_ms": "ms",
    "wake_load_ops_per_s": "ops/s",
    "wake_crew_loaded_p50_ms": "ms",
    "wake_crew_loaded_p99_ms": "ms",
    "wake_crew_load_ops_per_s": "ops/s",
    "burst_one_at_a_time_posts": "posts",
    "burst_one_at_a_time_per_s": "wakes/s",
    "burst_pipelined_posts": "posts",
    "burst_pipelined_per_s": "wakes/s",
    "burst_pipelined_commit_per_s": "posts/s",
    "parked_crew_kb": "KB/crew",
    "parked_crew_start_ms": "ms CPU/crew",
    "parked_crew_start_wall_ms": "ms/crew",
    "mass_sleep_crews": "crews",
    "mass_sleep_rss_live_mb": "MB",
    "mass_sleep_rss_asleep_mb": "MB",
    "mass_sleep_rss_given_back_mb": "MB",
    "malloc_trimmed": "1 = glibc malloc_trim ran",
}
"""The units of the figures this module adds to the lifecycle suite."""


def disk_bytes_per_crew(db: str, crews: int) -> float:
    """The store's bytes on disk (file and WAL) per sleeping crew."""
    size = sum(os.path.getsize(db + suffix) for suffix in ("", "-wal") if os.path.exists(db + suffix))
    return size / crews


def _wake_all(crews: list[str], post: Any) -> tuple[float, float]:
    """(seconds until every post was made, seconds until every agent got its message)."""
    delivered = DELIVERIES.expect_all(crews)
    started = time.perf_counter()
    post(crews)
    posted = time.perf_counter() - started
    if not delivered.wait(900):
        raise RuntimeError(f"a burst of {len(crews)} posts did not wake every crew within 900 s")
    return posted, time.perf_counter() - started


def burst(rt: Runtime, one_at_a_time: list[str], pipelined: list[str]) -> dict[str, float]:
    """Wake ``one_at_a_time`` with one blocking ``post`` each, then ``pipelined`` with
    ``post_nowait`` (all from this thread)."""
    client = rt.hub.bind("bench", "burst")

    def one_by_one(crews: list[str]) -> None:
        for crew in crews:
            client.post(f"agent://{crew}/a", {"wake": crew})

    def pipelining(crews: list[str]) -> None:
        wait([client.post_nowait(f"agent://{crew}/a", {"wake": crew}) for crew in crews])

    _, single = _wake_all(one_at_a_time, one_by_one)
    committed, woken = _wake_all(pipelined, pipelining)
    return {
        "burst_one_at_a_time_posts": float(len(one_at_a_time)),
        "burst_one_at_a_time_per_s": len(one_at_a_time) / single,
        "burst_pipelined_posts": float(len(pipelined)),
        "burst_pipelined_per_s": len(pipelined) / woken,
        "burst_pipelined_commit_per_s": len(pipelined) / committed,
    }


LOAD_SINK = "agent://bench-load/sink"
"""The mailbox the load posts to (a reader drains it)."""

LOADER_NAME = "bench-loader"
"""The name the load crews are spawned under."""


@contextlib.contextmanager
def _drained_sink(rt: Runtime) -> Iterator[None]:
    """:data:`LOAD_SINK` registered and drained by a reader thread while the block runs."""
    registration = rt.hub.register_mailbox(LOAD_SINK)
    reader = registration.reader()
    token = CancelToken()

    def drain() -> None:
        try:
            while True:
                reader.receive(cancel=token)
        except CancelledError:
            return

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    try:
        yield
    finally:
        token.cancel()
        thread.join(30)
        reader.close()
        registration.close()


def wake_each(rt: Runtime, crews: list[str], what: str) -> list[float]:
    """Wake ``crews`` one at a time by a post; post -> the agent given it, per crew.
    ``RuntimeError`` naming ``what`` if a crew is not woken within 60 s."""
    poster = rt.hub.bind("bench", "poster")
    latencies: list[float] = []
    for crew in crews:
        delivered = DELIVERIES.expect(crew)
        before = time.perf_counter()
        poster.post(f"agent://{crew}/a", {"wake": crew})
        if not delivered.wait(60):
            raise RuntimeError(f"crew {crew} was not woken by its post {what}")
        latencies.append(DELIVERIES.at[crew][0] - before)
    return latencies


def loaded_latencies(rt: Runtime, crews: list[str]) -> tuple[list[float], float]:
    """Wake ``crews`` one at a time (as ``wake_latency``) while clients bound to
    ``LOAD_CREWS`` crew ids post and publish from two threads; the latencies, and the
    load's operations/s."""
    clients = [rt.hub.bind(f"load-{i}", "a") for i in range(LOAD_CREWS)]
    stop = threading.Event()
    done = [0, 0]

    def load(index: int) -> None:
        mine = clients[index::2]
        in_flight: deque[Future[Message]] = deque()
        i = 0
        while not stop.is_set():
            client = mine[i % len(mine)]
            in_flight.append(client.post_nowait(LOAD_SINK, b"load"))  # pipelined: as fast as the writer takes them
            client.publish("bench.load", b"load")
            if len(in_flight) > IN_FLIGHT:
                in_flight.popleft().result()
            i += 1
        wait(in_flight)
        done[index] = i * 2

    with _drained_sink(rt):
        threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in (0, 1)]
        for thread in threads:
            thread.start()
        started = time.perf_counter()
        try:
            latencies = wake_each(rt, crews, "under the load of clients")
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
        return latencies, sum(done) / (time.perf_counter() - started)


class CrewLoad:
    """The model of the load crews: each turn after the first follows one finished
    operation; turns alternate a ``post_message`` to :data:`LOAD_SINK` and a
    ``publish_event``, until :attr:`stop` is set (then the agent answers, its crew
    completes)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.ops = itertools.count()
        self.going: set[str] = set()
        """The crews that finished an operation (their mailboxes registered, their
        first turn done): a set's ``add`` is atomic under the GIL."""

    def policy(self, request: ModelRequest) -> ModelResponse:
        if request.turn > 0:
            next(self.ops)  # one operation done (itertools.count is atomic under the GIL)
            self.going.add(request.crew_id)
        if self.stop.is_set():
            return respond("done")
        if request.turn % 2 == 0:
            return call("post_message", {"target_mailbox": LOAD_SINK, "payload": "load"})
        return call("publish_event", {"topic": "bench.load", "payload": "load"})

    def blueprint(self) -> CrewBlueprint:
        agent = Agent("a", ScriptedModel(policy=self.policy), max_turns=2**31, max_conversation=4)
        return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("load", agent.agent_id)]))


def crew_loaded_latencies(rt: Runtime, sup: CrewSupervisor, crews: list[str]) -> tuple[list[float], float]:
    """Wake ``crews`` one at a time while ``LOAD_CREWS`` live crews under ``sup`` post
    (one blocking ``post_message`` at a time each: the tool waits for its commit) and
    publish as fast as their turns go, once every one of them has finished an operation;
    the latencies, and the load's operations/s. Every load crew then completes."""
    load = CrewLoad()
    sup.register_factory(LOADER_NAME, load.blueprint())
    loaders = [f"load-crew-{i}" for i in range(LOAD_CREWS)]
    with _drained_sink(rt):
        for crew in loaders:
            sup.spawn(LOADER_NAME, crew)
        # The steady load, not the spawns: their mailbox registrations are writes that
        # order against every other (no key), and a wake's post queued behind one waits.
        wait_until(lambda: len(load.going) == LOAD_CREWS, timeout=300, what="every load crew posting")
        first = next(load.ops)
        started = time.perf_counter()
        try:
            latencies = wake_each(rt, crews, "under the load of crews")
        finally:
            load.stop.set()
            ops = next(load.ops) - first
            elapsed = time.perf_counter() - started
            for crew in loaders:
                sup.wait_finished(crew, timeout=120)
    return latencies, ops / elapsed


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def _spawn_parked(sup: CrewSupervisor, crews: list[str]) -> tuple[float, float]:
    """Spawn ``crews`` and wait until each is parked on its wait; (CPU seconds, wall
    seconds) until no pool thread had work left, before the statuses are checked."""
    cpu = time.process_time()
    wall = time.perf_counter()
    for crew in crews:
        sup.spawn(FOREVER_NAME, crew)
    wait_until(lambda: DEFAULT_POOL.busy == 0, timeout=120, what="every crew's first turn done")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    for crew in crews:
        wait_until(lambda c=crew: sup.status(c) is CrewStatus.WAITING, timeout=120, what=f"{crew} parked")  # type: ignore[misc]
    return cpu, wall


def memory_child(db: str, parked: int, sleeping: int) -> None:
    """Child process of :func:`memory`: print its figures as one JSON line."""
    logger.remove()
    logger.add(sys.stderr, level="INFO")
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=FACTORIES)
    try:
        _spawn_parked(sup, [f"warm{i}" for i in range(50)])  # first-use costs out of the way
        # Start cost: CPU time per crew from spawn to parked on its wait.
        cpu, wall = _spawn_parked(sup, [f"p{i}" for i in range(parked)])
        start_cpu_ms = cpu / parked * 1000
        start_wall_ms = wall / parked * 1000
        # Memory of a parked crew: what tracemalloc sees allocated for ``parked`` more.
        give_back_memory()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        _spawn_parked(sup, [f"q{i}" for i in range(parked)])
        give_back_memory()
        traced_kb = (tracemalloc.get_traced_memory()[0] - before) / parked / 1024
        tracemalloc.stop()
        # The resident set around a mass sleep.
        give_back_memory()
        rss_start = _rss_kb()
        many = [f"m{i}" for i in range(sleeping)]
        _spawn_parked(sup, many)
        rss_live = _rss_kb()
        for crew in many:
            if not sup.sleep(crew):
                raise RuntimeError(f"crew {crew} did not sleep")
        wait_until(lambda: sup.ref(many[-1]) is None, timeout=120, what="the last crew released")
        rss_asleep = _rss_kb()
        trimmed = give_back_memory()
        rss_trimmed = _rss_kb()
    finally:
        sup.stop()
        rt.stop()
    figures = {
        "parked_crew_kb": traced_kb,
        "parked_crew_start_ms": start_cpu_ms,
        "parked_crew_start_wall_ms": start_wall_ms,
        "mass_sleep_crews": float(sleeping),
        "mass_sleep_rss_live_mb": (rss_live - rss_start) / 1024,
        "mass_sleep_rss_asleep_mb": (rss_asleep - rss_start) / 1024,
        "mass_sleep_rss_given_back_mb": (rss_trimmed - rss_start) / 1024,
        "malloc_trimmed": float(trimmed),
    }
    print(json.dumps(figures))


def memory(db: str, parked: int, sleeping: int) -> dict[str, float]:
    """Run :func:`memory_child` on a new store ``db`` in a fresh process."""
    code = "import sys; from orkeon_actors.bench.lifecycle_scale import memory_child; " + (
        "memory_child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, db, str(parked), str(sleeping)],
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    ).stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures
