"""``orkeon bench sim``: crews of every mode run to completion with scripted agents, and
how many concurrently active four-agent crews this machine holds.

Figures: crews/s and hub messages/s (mailbox posts and topic events the crews made, per
wall second) over N crews of each mode; RSS per active crew; the largest number of
concurrently active (parked, four agents each) crews started without error, trying
doubling counts up to the target of 1,000.
"""

from __future__ import annotations

import resource
import time

from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.crew.agent import Agent
from orkeon_actors.crew.model import ScriptedModel, call, respond
from orkeon_actors.orchestration import Branch, Parallel
from orkeon_actors.sim.examples import EXAMPLES
from orkeon_actors.sim.simulation import Simulation

__all__ = ["bench_sim"]


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 1e6


def _throughput(per_mode: int) -> tuple[float, float]:
    with Simulation(seed=1) as sim:
        started = time.perf_counter()
        for _ in range(per_mode):
            for build in EXAMPLES.values():
                build(sim)
        result = sim.run()
        elapsed = time.perf_counter() - started
        if not result.all_completed:
            raise RuntimeError(f"bench crews did not all complete: {result}")
        messages = sum(1 for e in sim.trace.events() if e.kind in ("message", "event"))
        return len(result.crews) / elapsed, messages / elapsed


def _parked_crews(count: int) -> float:
    """Start ``count`` four-agent crews whose agents all park; RSS per crew (MB)."""
    with Simulation(seed=2) as sim:
        before = _rss_mb()
        for i in range(count):
            agents = [
                Agent(
                    f"a{j}",
                    ScriptedModel([call("wait_for_event", {"topic": f"go.{i}", "wait_forever": True}), respond("ok")]),
                )
                for j in range(4)
            ]
            sim.spawn("held", agents=agents, orchestration=Parallel([Branch(f"b{j}", f"a{j}", "t") for j in range(4)]))
        sim.wait_quiescent()
        statuses = sim.statuses()
        if any(s.value != "waiting_for_message" for s in statuses.values()):
            raise RuntimeError("not every crew parked")
        return (_rss_mb() - before) / count


@register("sim")
def bench_sim(quick: bool) -> BenchResult:
    per_mode = 5 if quick else 20
    crews_per_s, messages_per_s = _throughput(per_mode)
    held, rss_per_crew = 0, 0.0
    for count in [50, 100] if quick else [125, 250, 500, 1000]:
        try:
            rss_per_crew = _parked_crews(count)
        except Exception:  # the first count the machine cannot hold ends the search
            break
        held = count
    return BenchResult(
        "sim",
        {
            "crews_per_s": crews_per_s,
            "hub_messages_per_s": messages_per_s,
            "rss_mb_per_active_crew": rss_per_crew,
            "max_active_crews": float(held),
        },
        {
            "crews_per_s": "crews/s",
            "hub_messages_per_s": "msg/s",
            "rss_mb_per_active_crew": "MB",
            "max_active_crews": "crews",
        },
        notes=f"{per_mode} crews per mode to completion; active crews have 4 parked agents each",
    )
