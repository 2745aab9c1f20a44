"""``orkeon bench lifecycle``: crew sleep and wake (spec §7) at the scale of issue #8.

Four measurements, each on its own store file in a temporary directory under the current
working directory (removed afterwards):

* **real sleeps** (``sleeps_per_s``): ``S`` crews (one agent parked on
  ``receive_message``) are spawned under a :class:`CrewSupervisor` and put to sleep one
  by one through the real path (snapshot, pending waits, parked mailboxes: one
  transaction each). The first of them is the *template* of the big stores below.
* **boot** (``boot_ms``, ``boot_rss_mb``): a store holding ``B`` sleeping crews is
  booted (``Runtime.start`` + ``CrewSupervisor``) in a fresh child process, which
  reports its boot time and the growth of its resident set (``VmRSS`` after boot minus
  before, so the interpreter and imports are not counted; ``boot_rss_total_mb`` is the
  whole process).
* **wake latency** (``wake_latency_p50/p99_ms``): with ``W`` crews asleep, ``L`` of them
  (spread over the store) are woken one at a time by a post; the latency runs from just
  before ``post`` to the moment the woken agent's model is called with the posted
  message as its tool result. Every sampled crew must then complete.
* **expiries** (``expiries_per_s``): ``E`` sleeping crews of two agents (the
  :data:`PAIR_NAME` blueprint: agent ``a`` parked on a finite ``receive_message``, then
  agent ``b``'s task) whose waits all expire at one instant ``T`` shortly after boot;
  the durable wait scheduler finds them in the ``pending_waits`` index, each crew wakes
  and its agent's model receives the ``WaitTimedOutMessage`` (``timed_out``) as its
  tool result. Rate: ``E`` over the time from ``T`` to the last such delivery.

The big stores are written by :func:`populate`: the rows the real sleep path wrote for
the template crew (its ``crew_snapshots`` row, whose body is the snapshot codec's own
JSON, its ``pending_waits`` rows and its ``mailbox_registry`` rows) copied once per
crew with the crew id and the wait ids (fresh ULIDs) replaced, in one transaction. The
wake and expiry measurements double as the check that such crews really wake and
complete; ``populate_s`` says how long writing the ``B``-crew store took.

Sizes: ``S=200, B=1,000,000, W=100,000, L=1,000, E=5,000``; ``--quick``:
``S=20, B=W=2,000, L=50, E=300``. Logging runs at INFO (transitions log at DEBUG).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import apsw
import attrs
from loguru import logger

from orkeon_actors.bench.context import boot_crews as configured_boot_crews
from orkeon_actors.bench.context import progress, restore_logging, scratch_directory
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, query_crew, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor, LifecycleState
from orkeon_actors.lifecycle.activation import CrewSource
from orkeon_actors.model.ids import new_ulid_str
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.runtime import Runtime
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.schema import migrate
from orkeon_actors.testing import wait_until

__all__ = ["PAIR_NAME", "Template", "bench_lifecycle", "capture_template", "expiry_run", "populate"]

MARKER = "zzbenchtemplatezz"
"""The template crew's id: unique enough to be replaced textually in its rows."""

FOREVER_NAME = "forever"
FINITE_NAME = "finite"
PAIR_NAME = "finite-pair"
"""The expiry run's crews: two agents, the first parked on a finite ``receive_message``,
the second's task after it (the crew the lifecycle target names)."""
FINITE_TIMEOUT_MS = 3_600_000


class Deliveries:
    """What the bench models saw: for each crew, when its agent got the result of its
    ``receive_message`` (``time.perf_counter``, ``time.time``) and whether it timed out;
    ``last_cpu`` is the process CPU time (``time.process_time``) at the delivery that
    completed an :meth:`expect_all`.

    Waiting costs the system under test nothing: :meth:`expect` and :meth:`expect_all`
    return events set by :meth:`record` (O(1) per delivery), never a polled scan."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at: dict[str, tuple[float, float, bool]] = {}
        self.events: dict[str, threading.Event] = {}
        self._awaited: set[str] = set()
        self._all: threading.Event | None = None
        self.last_cpu = 0.0

    def expect(self, crew: str) -> threading.Event:
        """An event set once ``crew``'s delivery is recorded."""
        event = threading.Event()
        with self.lock:
            self.events[crew] = event
        return event

    def expect_all(self, crews: list[str]) -> threading.Event:
        """Forget what was recorded for ``crews``; return an event set once each of them
        has a delivery recorded (at once for an empty list). One such wait at a time."""
        event = threading.Event()
        with self.lock:
            for crew in crews:
                self.at.pop(crew, None)
            self._awaited = set(crews)
            self._all = event
            if not self._awaited:
                event.set()
        return event

    def record(self, crew: str, timed_out: bool) -> None:
        stamp = (time.perf_counter(), time.time(), timed_out)
        done = None
        with self.lock:
            self.at[crew] = stamp
            event = self.events.pop(crew, None)
            if crew in self._awaited:
                self._awaited.discard(crew)
                if not self._awaited:
                    done, self._all = self._all, None
                    self.last_cpu = time.process_time()  # once: it walks every thread of the process
        if event is not None:
            event.set()
        if done is not None:
            done.set()


DELIVERIES = Deliveries()


def _policy(receive_args: dict[str, Any]) -> Any:
    def policy(request: ModelRequest) -> ModelResponse:
        if request.turn == 0:
            return call("receive_message", receive_args)
        result = request.last_tool_result()
        DELIVERIES.record(request.crew_id, bool(isinstance(result, dict) and result.get("timed_out")))
        return respond("done")

    return policy


def _blueprint(receive_args: dict[str, Any]) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(policy=_policy(receive_args)))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("wait", agent.agent_id)]))


def _pair_blueprint(receive_args: dict[str, Any]) -> CrewBlueprint:
    waiter = Agent("a", ScriptedModel(policy=_policy(receive_args)))
    reporter = Agent("b", ScriptedModel([respond("reported")]))
    return CrewBlueprint(
        agents=[waiter, reporter],
        orchestration=Sequential([Task("wait", waiter.agent_id), Task("report", reporter.agent_id)]),
    )


FACTORIES: dict[str, CrewSource] = {
    FOREVER_NAME: _blueprint({"wait_forever": True}),
    FINITE_NAME: _blueprint({"timeout_ms": FINITE_TIMEOUT_MS}),
    PAIR_NAME: _pair_blueprint({"timeout_ms": FINITE_TIMEOUT_MS}),
}
"""Shared blueprints (``CrewSource``): no factory call per wake."""


def _status(sup: CrewSupervisor, crew: str) -> CrewStatus | None:
    ref = sup.ref(crew)
    return None if ref is None else query_crew(ref, "status")


# -- the template and the bulk population ---------------------------------------------


@attrs.frozen
class Template:
    """The rows the real sleep path wrote for one crew (id :data:`MARKER`)."""

    snapshot: tuple[Any, ...]
    """``crew_snapshots`` row: crew_id, snapshot, mode, schema_version, snapshot_at, state."""
    waits: tuple[tuple[Any, ...], ...]
    """``pending_waits`` rows, columns as :data:`_WAIT_COLUMNS`."""
    registry: tuple[tuple[Any, ...], ...]
    """``mailbox_registry`` rows: address, registered_at."""
    expires_at: datetime | None
    """The expiry of its (single) wait, or ``None`` for a FOREVER wait."""


_WAIT_COLUMNS = (
    "wait_id, crew_id, kind, topic, target_crew_id, target_mailbox, correlation_id, metadata_match, "
    "started_at, expires_at"
)


def capture_template(db: str, name: str) -> Template:
    """Spawn crew :data:`MARKER` from factory ``name`` on a new store ``db``, let it park
    on its ``receive_message``, put it to sleep (the real path), and read back its rows."""
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=FACTORIES)
    try:
        sup.spawn(name, MARKER)
        wait_until(lambda: _status(sup, MARKER) is CrewStatus.WAITING, timeout=30, what="template waiting")
        if not sup.sleep(MARKER):
            raise RuntimeError("the template crew did not sleep")
    finally:
        sup.stop()
        rt.stop()
    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        snapshot = conn.execute(
            "SELECT crew_id, snapshot, mode, schema_version, snapshot_at, state FROM crew_snapshots WHERE crew_id = ?",
            (MARKER,),
        ).fetchall()
        waits = conn.execute(f"SELECT {_WAIT_COLUMNS} FROM pending_waits WHERE crew_id = ?", (MARKER,)).fetchall()
        registry = conn.execute(
            "SELECT address, registered_at FROM mailbox_registry WHERE address LIKE ?", (f"%{MARKER}%",)
        ).fetchall()
    finally:
        conn.close()
    if len(snapshot) != 1 or len(waits) != 1 or not registry:
        raise RuntimeError(f"unexpected template rows: {len(snapshot)} snapshot(s), {len(waits)} wait(s)")
    expires = waits[0][9]
    return Template(
        tuple(snapshot[0]),
        tuple(tuple(w) for w in waits),
        tuple(tuple(r) for r in registry),
        None if expires is None else datetime.fromisoformat(str(expires).replace("Z", "+00:00")),
    )


def _sub(value: Any, replacements: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
    elif isinstance(value, bytes):
        for old, new in replacements:
            value = value.replace(old.encode(), new.encode())
    return value


def populate(db: str, template: Template, crews: list[str], *, expires_at: datetime | None = None) -> float:
    """Create the store ``db`` (the store's own migrations) holding ``crews`` asleep as
    the template was: one transaction, journal off while it is written (a bench file),
    then WAL as the runtime uses it. ``expires_at`` moves the template's expiry. Returns
    the seconds it took."""
    started = time.perf_counter()
    conn = apsw.Connection(db)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -262144")
        migrate(conn, db)
        moves: list[tuple[str, str]] = []
        if expires_at is not None:
            if template.expires_at is None:
                raise ValueError("the template has no expiry to move")
            moves = [
                (template.expires_at.isoformat(), expires_at.isoformat()),
                (format_time(template.expires_at), format_time(expires_at)),
            ]
        template_waits = [str(w[0]) for w in template.waits]

        def per_crew(crew: str) -> list[tuple[str, str]]:
            return [(MARKER, crew), *((w, new_ulid_str()) for w in template_waits), *moves]

        conn.execute("BEGIN")
        snapshots: list[tuple[Any, ...]] = []
        waits: list[tuple[Any, ...]] = []
        registry: list[tuple[Any, ...]] = []

        def flush() -> None:
            conn.executemany(
                "INSERT INTO crew_snapshots (crew_id, snapshot, mode, schema_version, snapshot_at, state) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                snapshots,
            )
            conn.executemany(
                f"INSERT INTO pending_waits ({_WAIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", waits
            )
            conn.executemany("INSERT INTO mailbox_registry (address, registered_at) VALUES (?, ?)", registry)
            snapshots.clear()
            waits.clear()
            registry.clear()

        for crew in crews:
            replacements = per_crew(crew)
            snapshots.append(tuple(_sub(v, replacements) for v in template.snapshot))
            waits.extend(tuple(_sub(v, replacements) for v in w) for w in template.waits)
            registry.extend(tuple(_sub(v, replacements) for v in r) for r in template.registry)
            if len(snapshots) >= 10_000:
                flush()
        flush()
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    return time.perf_counter() - started


def bench_crew_ids(count: int) -> list[str]:
    return [f"b{i:07d}" for i in range(count)]


# -- the measurements ---------------------------------------------------------------------


def _real_sleeps(db: str, count: int) -> tuple[float, Template]:
    crews = [f"s{i}" for i in range(count)]
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=FACTORIES)
    try:
        for crew in crews:
            sup.spawn(FOREVER_NAME, crew)
        for crew in crews:
            wait_until(lambda c=crew: _status(sup, c) is CrewStatus.WAITING, timeout=60, what=f"{crew} waiting")  # type: ignore[misc]
        started = time.perf_counter()
        for crew in crews:
            if not sup.sleep(crew):
                raise RuntimeError(f"crew {crew} did not sleep")
        elapsed = time.perf_counter() - started
    finally:
        sup.stop()
        rt.stop()
    return count / elapsed, capture_template(db + ".template", FOREVER_NAME)


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def boot_child(db: str) -> None:
    """Child process of the boot measurement: boot ``db``, print JSON figures."""
    logger.remove()
    logger.add(sys.stderr, level="INFO")
    before = _rss_kb()
    started = time.perf_counter()
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=FACTORIES)
    elapsed = time.perf_counter() - started
    after = _rss_kb()
    asleep = sup.booted_asleep
    awake = sup.stats.wakes
    sup.stop()
    rt.stop()
    print(
        json.dumps(
            {"boot_s": elapsed, "rss_before_kb": before, "rss_after_kb": after, "asleep": asleep, "woken": awake}
        )
    )


def _boot(db: str, expected: int) -> dict[str, Any]:
    code = "import sys; from orkeon_actors.bench.lifecycle import boot_child; boot_child(sys.argv[1])"
    out = subprocess.run(
        [sys.executable, "-c", code, db], check=True, capture_output=True, text=True, timeout=600
    ).stdout
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    if figures["asleep"] != expected or figures["woken"] != 0:
        raise RuntimeError(f"boot found {figures['asleep']} asleep and woke {figures['woken']}, expected {expected}, 0")
    return figures


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def _wake_latencies(db: str, count: int, samples: int, quick: bool) -> tuple[list[float], dict[str, float]]:
    """The wake latencies of ``samples`` crews among ``count`` asleep, then (the second
    value) those of as many others under load and the burst figures (see
    :mod:`orkeon_actors.bench.lifecycle_scale`)."""
    from orkeon_actors.bench import lifecycle_scale as scale  # it imports this module

    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=FACTORIES)
    try:
        if sup.booted_asleep != count:
            raise RuntimeError(f"{sup.booted_asleep} crews asleep at boot, expected {count}")
        order = bench_crew_ids(count)
        random.Random(8).shuffle(order)
        chosen, loaded, crew_loaded = (order[i * samples : (i + 1) * samples] for i in range(3))
        single, pipelined = (50, 300) if quick else (2_000, 19_500)
        burst_one = order[3 * samples : 3 * samples + single]
        burst_many = order[3 * samples + single : 3 * samples + single + pipelined]
        latencies = scale.wake_each(rt, chosen, "with nothing else running")
        progress(f"{samples} wakes under the load of {scale.LOAD_CREWS:,} client ids")
        under_load, load_rate = scale.loaded_latencies(rt, loaded)
        progress(f"{samples} wakes under the load of {scale.LOAD_CREWS:,} live crews")
        under_crews, crew_rate = scale.crew_loaded_latencies(rt, sup, crew_loaded)
        for crew in chosen + loaded + crew_loaded:
            wait_until(
                lambda c=crew: sup.state(c) is LifecycleState.COMPLETED,  # type: ignore[misc]
                timeout=60,
                what=f"{crew} completed",
            )
        progress(f"a burst of {single:,} posts one at a time, then {pipelined:,} pipelined")
        more = scale.burst(rt, burst_one, burst_many)  # every burst crew's agent got its message
        more.update(
            {
                "wake_loaded_p50_ms": _pct(under_load, 0.5) * 1000,
                "wake_loaded_p99_ms": _pct(under_load, 0.99) * 1000,
                "wake_load_ops_per_s": load_rate,
                "wake_crew_loaded_p50_ms": _pct(under_crews, 0.5) * 1000,
                "wake_crew_loaded_p99_ms": _pct(under_crews, 0.99) * 1000,
                "wake_crew_load_ops_per_s": crew_rate,
            }
        )
        return latencies, more
    finally:
        sup.stop()
        rt.stop()


def expiry_run(db: str, template: Template, count: int, lead: float) -> tuple[float, float]:
    """``count`` crews of ``template`` (a finite wait) asleep in a new store ``db``,
    their waits all expiring ``lead`` seconds from now; boot it and wait for every
    agent to be given its ``WaitTimedOutMessage``. Returns the expiries per second
    (``count`` over the time from the instant to the last delivery) and the process's
    CPU microseconds per expiry over the same span (every thread: supervisor, crews'
    turns, writer, collections). ``RuntimeError`` if the boot outlasts ``lead`` or an
    expiry is missing or delivered something else."""
    crews = bench_crew_ids(count)
    instant = datetime.now(UTC) + timedelta(seconds=lead)
    populate(db, template, crews, expires_at=instant)
    delivered = DELIVERIES.expect_all(crews)
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=FACTORIES)
    try:
        if time.time() >= instant.timestamp():
            raise RuntimeError(f"populating and booting took longer than the {lead}s lead: raise it")
        delivered.wait(max(0.0, instant.timestamp() - time.time()))  # idle until the instant
        cpu_at_instant = time.process_time()
        if not delivered.wait(600):
            missing = count - len([c for c in crews if c in DELIVERIES.at])
            raise RuntimeError(f"{missing} of {count} expiries not delivered within 600 s")
        stamps = [DELIVERIES.at[c] for c in crews]
        if not all(timed_out for _, _, timed_out in stamps):
            raise RuntimeError("a crew woke with something else than its WaitTimedOutMessage")
        last = max(wall for _, wall, _ in stamps)
        return count / (last - instant.timestamp()), (DELIVERIES.last_cpu - cpu_at_instant) / count * 1e6
    finally:
        sup.stop()
        rt.stop()


def _to_stderr(message: str) -> None:
    """A sink writing to whatever ``sys.stderr`` is when a record comes (a stream bound
    once would outlive a caller's redirection, pytest's capture say, and fail once it
    is closed)."""
    sys.stderr.write(message)


@contextlib.contextmanager
def info_logging() -> Iterator[None]:
    """Lifecycle transitions log at DEBUG: run at INFO, as a deployment would (loguru's
    default handler prints DEBUG to stderr, which would dominate the figures). Then
    gives loguru back as the command set it (:func:`restore_logging`)."""
    logger.remove()
    sink = logger.add(_to_stderr, level="INFO")
    try:
        yield
    finally:
        logger.remove(sink)
        restore_logging()


@register("lifecycle")
def bench_lifecycle(quick: bool) -> BenchResult:
    from orkeon_actors.bench import lifecycle_scale as scale  # it imports this module

    sleeps, boot_crews, wake_crews, samples, expiring = (
        (20, 2_000, 2_000, 50, 300) if quick else (200, 1_000_000, 100_000, 1_000, 5_000)
    )
    boot_crews = configured_boot_crews(boot_crews)
    directory = scratch_directory("orkeon-bench-lifecycle-")
    with info_logging():
        figures, populate_s = _measure(directory, quick, sleeps, boot_crews, wake_crews, samples, expiring)
    figures["populate_s"] = populate_s
    units = {
        "sleeps_per_s": "sleeps/s",
        "boot_crews": "crews",
        "populate_s": "s",
        "boot_ms": "ms",
        "boot_rss_mb": "MB",
        "boot_rss_total_mb": "MB",
        "wake_crews": "crews",
        "wake_latency_p50_ms": "ms",
        "wake_latency_p99_ms": "ms",
        "expiry_crews": "crews",
        "expiries_per_s": "expiries/s",
        "expiry_cpu_us": "µs/expiry",
        **scale.UNITS,
    }
    notes = (
        f"{sleeps} real sleeps; boot of {boot_crews:,} sleeping crews in a child process "
        f"(store written in {populate_s:.1f} s); {samples} sequential wakes (post -> agent) among "
        f"{wake_crews:,} asleep, then as many under the load of {scale.LOAD_CREWS:,} client ids posting and "
        f"publishing, as many under the load of {scale.LOAD_CREWS:,} live crews doing so, then a burst; "
        f"{expiring:,} crews of two agents whose finite waits expire at one instant; a memory child; "
        "logging at INFO"
    )
    return BenchResult("lifecycle", {k: figures[k] for k in units}, units, notes=notes)


def _measure(
    directory: str, quick: bool, sleeps: int, boot_crews: int, wake_crews: int, samples: int, expiring: int
) -> tuple[dict[str, float], float]:
    from orkeon_actors.bench import lifecycle_scale as scale  # it imports this module

    try:
        progress(f"{sleeps} real sleeps")
        sleeps_per_s, template = _real_sleeps(os.path.join(directory, "sleeps.db"), sleeps)
        pair = capture_template(os.path.join(directory, "pair-template.db"), PAIR_NAME)

        boot_db = os.path.join(directory, "boot.db")
        progress(f"populating {boot_crews:,} sleeping crews, then a boot")
        populate_s = populate(boot_db, template, bench_crew_ids(boot_crews))
        boot_disk = scale.disk_bytes_per_crew(boot_db, boot_crews)
        boot = _boot(boot_db, boot_crews)
        for suffix in ("", "-wal", "-shm", ".lock"):
            if os.path.exists(boot_db + suffix):
                os.remove(boot_db + suffix)

        wake_db = os.path.join(directory, "wake.db")
        progress(f"populating {wake_crews:,} sleeping crews, then {samples} wakes")
        populate(wake_db, template, bench_crew_ids(wake_crews))
        wake_disk = scale.disk_bytes_per_crew(wake_db, wake_crews)
        latencies, more = _wake_latencies(wake_db, wake_crews, samples, quick)

        progress(f"{expiring:,} expiries")
        expiries_per_s, expiry_cpu_us = expiry_run(
            os.path.join(directory, "expiry.db"), pair, expiring, lead=1.0 if quick else 3.0
        )

        progress("a memory child: parked crews, a mass sleep")
        more.update(scale.memory(os.path.join(directory, "memory.db"), *((200, 300) if quick else (1_000, 10_000))))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    figures = {
        "sleeps_per_s": sleeps_per_s,
        "boot_crews": float(boot_crews),
        "boot_ms": boot["boot_s"] * 1000,
        "boot_rss_mb": (boot["rss_after_kb"] - boot["rss_before_kb"]) / 1024,
        "boot_rss_total_mb": boot["rss_after_kb"] / 1024,
        "wake_crews": float(wake_crews),
        "wake_latency_p50_ms": _pct(latencies, 0.5) * 1000,
        "wake_latency_p99_ms": _pct(latencies, 0.99) * 1000,
        "expiry_crews": float(expiring),
        "expiries_per_s": expiries_per_s,
        "expiry_cpu_us": expiry_cpu_us,
        "boot_disk_bytes_per_crew": boot_disk,
        "wake_disk_bytes_per_crew": wake_disk,
        **more,
    }
    return figures, populate_s
