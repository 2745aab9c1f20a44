"""What a live crew's durable cursor costs the publisher (``orkeon bench hub``, the
``live_cursor_*`` figures; Orkeon EventHub & Crew Lifecycle specification, §5.2, §7).

A :class:`~orkeon_actors.lifecycle.CrewSupervisor` on a durable store (a temporary
file, ``durability="full"``) runs one crew whose agent loops on
``wait_for_event("orders")``; it is put to sleep once (its snapshot holds the cursor)
and woken, so its cursor is *live and durable*: every publish on ``orders`` writes a
``cursor_events`` row, committed before ``publish`` returns. Then ``N`` publishes on
``orders`` are timed, from one thread and from four (the writer's group commit shares a
commit between concurrent publishers), until the last one returned; the agent reads
them meanwhile. The same run with the cursor opted out (``volatile_cursors``: the
events stay in memory, which is what every live cursor cost before it was durable) is
the baseline; the ratio is durable over volatile, measured in the same run.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orkeon_actors.bench.context import scratch_directory
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.runtime import Runtime
from orkeon_actors.testing import wait_until
from orkeon_actors.timed_threads import run_together

__all__ = ["live_cursor_figures", "publishes_per_second"]


def _factory(volatile: bool) -> Any:
    def policy(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1] if request.messages else None
        if last is not None and last.role == "tool" and '"payload": "done"' in last.content:
            return respond("done")
        return call("wait_for_event", {"topic": "orders", "wait_forever": True})

    def factory(_crew: Any) -> CrewBlueprint:
        agent = Agent(
            "a",
            ScriptedModel(policy=policy),
            max_turns=10_000_000,
            volatile_cursors={"orders"} if volatile else frozenset(),
        )
        return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))

    return factory


def publishes_per_second(directory: Path, publishes: int, threads: int, *, volatile: bool) -> float:
    """Publishes/s on a topic a live crew's cursor reads (durable unless ``volatile``),
    from ``threads`` threads, timed until the last ``publish`` returned."""
    store = directory / f"live-{'volatile' if volatile else 'durable'}-{threads}.db"
    with Runtime.start(store=str(store)) as rt:
        sup = CrewSupervisor(rt, factories={"reader": _factory(volatile)})
        try:
            sup.spawn("reader", "r")
            wait_until(lambda: sup.status("r") is CrewStatus.WAITING, what="reader parked")
            if not sup.sleep("r"):
                raise RuntimeError("the bench reader did not sleep")
            shop = rt.hub.bind("shop")
            shop.publish("orders", json.dumps(-1))  # wakes it: its cursor is live from now on
            wait_until(lambda: sup.status("r") is CrewStatus.WAITING, what="reader awake")
            per_thread = publishes // threads

            def publisher() -> Callable[[], None]:
                client = rt.hub.bind("shop")

                def publish_all() -> None:
                    for n in range(per_thread):
                        client.publish("orders", n)

                return publish_all

            elapsed = run_together([publisher] * threads, name="bench-publisher").seconds
            shop.publish("orders", "done")
            wait_until(lambda: sup.outcome("r") is not None, what="reader finished", timeout=120)
        finally:
            sup.stop()
    return per_thread * threads / elapsed


def live_cursor_figures(quick: bool) -> tuple[dict[str, float], dict[str, str]]:
    """The ``live_cursor_*`` figures and units of ``orkeon bench hub``."""
    publishes = 400 if quick else 2_000
    directory = Path(scratch_directory("orkeon-bench-live-cursor-"))
    figures: dict[str, float] = {}
    units: dict[str, str] = {}
    try:
        for threads in (1, 4):
            durable = publishes_per_second(directory, publishes, threads, volatile=False)
            volatile = publishes_per_second(directory, publishes, threads, volatile=True)
            figures[f"live_cursor_durable_publish_per_s_{threads}t"] = durable
            figures[f"live_cursor_volatile_publish_per_s_{threads}t"] = volatile
            figures[f"live_cursor_durable_vs_volatile_{threads}t"] = durable / volatile
            units[f"live_cursor_durable_publish_per_s_{threads}t"] = "publish/s"
            units[f"live_cursor_volatile_publish_per_s_{threads}t"] = "publish/s (durable=False)"
            units[f"live_cursor_durable_vs_volatile_{threads}t"] = "ratio"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return figures, units
