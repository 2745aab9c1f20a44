"""``orkeon bench lifecycle``: crew sleep and wake (spec §7) on a durable runtime.

``N`` crews (one agent parked on ``receive_message``, forever) are spawned under a
``CrewSupervisor``, then put to sleep one by one (``sleeps_per_s``: snapshot, pending
waits, parked mailboxes, one transaction each); the runtime is restarted and the
supervisor's lazy boot timed (``boot_ms``); then one post per crew wakes them all
(``wakes_per_s``: post to completion of every crew). ``wake_latency_p50/p99`` are the
supervisor's own figures (trigger reaching the supervisor to restore told). The file
lives in a temporary directory under the current working directory, removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.crew import Agent, CrewStatus, ScriptedModel, call, query_crew, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.model.ids import CrewId
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.runtime import Runtime
from orkeon_actors.testing import wait_until

__all__ = ["bench_lifecycle"]


def _crew(_crew_id: CrewId) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("done")]))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("wait", agent.agent_id)]))


def _status(sup: CrewSupervisor, crew: str) -> CrewStatus | None:
    ref = sup.ref(crew)
    return None if ref is None else query_crew(ref, "status")


@register("lifecycle")
def bench_lifecycle(quick: bool) -> BenchResult:
    count = 50 if quick else 500
    crews = [f"c{i}" for i in range(count)]
    directory = tempfile.mkdtemp(prefix="orkeon-bench-lifecycle-", dir=os.getcwd())
    db = os.path.join(directory, "life.db")
    try:
        rt = Runtime.start(store=db)
        sup = CrewSupervisor(rt, factories={"w": _crew})
        try:
            for crew in crews:
                sup.spawn("w", crew)
            for crew in crews:
                wait_until(lambda c=crew: _status(sup, c) is CrewStatus.WAITING, timeout=60, what=f"{crew} waiting")  # type: ignore[misc]
            started = time.perf_counter()
            for crew in crews:
                if not sup.sleep(crew):
                    raise RuntimeError(f"crew {crew} did not sleep")
            sleep_s = time.perf_counter() - started
        finally:
            sup.stop()
            rt.stop()
        started = time.perf_counter()
        rt = Runtime.start(store=db)
        sup = CrewSupervisor(rt, factories={"w": _crew})
        boot_s = time.perf_counter() - started
        try:
            if sup.booted_asleep != count:
                raise RuntimeError(f"{sup.booted_asleep} crews asleep at boot, expected {count}")
            client = rt.hub.bind("bench", "poster")
            started = time.perf_counter()
            for crew in crews:
                client.post(f"agent://{crew}/a", {"wake": crew})
            for crew in crews:
                wait_until(lambda c=crew: _status(sup, c) is CrewStatus.COMPLETED, timeout=60, what=f"{crew} done")  # type: ignore[misc]
            wake_s = time.perf_counter() - started
            stats = sup.stats.as_dict()
        finally:
            sup.stop()
            rt.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    figures = {
        "crews": float(count),
        "sleeps_per_s": count / sleep_s,
        "boot_ms": boot_s * 1000,
        "wakes_per_s": count / wake_s,
        "wake_latency_p50_ms": (stats["wake_latency_p50"] or 0.0) * 1000,
        "wake_latency_p99_ms": (stats["wake_latency_p99"] or 0.0) * 1000,
    }
    units = {
        "crews": "",
        "sleeps_per_s": "sleeps/s",
        "boot_ms": "ms",
        "wakes_per_s": "wakes/s",
        "wake_latency_p50_ms": "ms",
        "wake_latency_p99_ms": "ms",
    }
    return BenchResult("lifecycle", figures, units, notes=f"{count} crews, sequential sleeps, one post per wake")
