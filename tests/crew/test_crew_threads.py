"""Many crews, few threads: starting crews in a burst, each parked on an async model
call, never raises the process's threads above the actor pool's size plus the I/O
loop's thread and the pool's watchdog (docs/crews.md, "Concurrency and its bounds")."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, ClassVar

import orkeon_actors as ok
from orkeon_actors.actors import DEFAULT_POOL
from orkeon_actors.crew import Agent, CrewActor, ModelRequest, ModelResponse, start_crew, wait_finished
from orkeon_actors.crew.model import Usage
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

CREWS = 2_000
POOL_SIZE = 4
"""A small pool, so that a pool growing with the burst (a thread per turn in flight)
shows up well before the machine's speed lets it keep up."""


class GatedModel:
    """Every call records the process's threads, then awaits one gate opened at the end."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.in_flight = 0
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.threads.append(threading.active_count())  # the I/O loop's thread: no race
        if self._gate is None:
            self._gate, self._loop = asyncio.Event(), asyncio.get_running_loop()
        self.in_flight += 1
        await self._gate.wait()
        return ModelResponse(text="done", usage=Usage(1, 1, 0.0))

    def open(self) -> None:
        assert self._loop is not None and self._gate is not None
        self._loop.call_soon_threadsafe(self._gate.set)


class CountingCrew(CrewActor):
    """Records the process's threads as each agent asks its model (on the crew's thread),
    in a start turn that takes a while (2 ms off the GIL, as a start turn on a loaded
    machine does): a pool that starts a thread whenever none is idle grows with the burst."""

    seen: ClassVar[list[int]] = []

    def on_model_call(self, agent_id: Any, request: ModelRequest) -> None:
        CountingCrew.seen.append(threading.active_count())
        time.sleep(0.002)  # the turn's work, not a wait for another thread


def test_a_burst_of_crews_parked_on_async_calls_stays_within_the_thread_bound() -> None:
    model = GatedModel()
    CountingCrew.seen = []
    size = DEFAULT_POOL.max_threads
    DEFAULT_POOL.trim()
    DEFAULT_POOL.max_threads = POOL_SIZE
    try:
        with ok.Runtime.start() as rt:
            baseline = threading.active_count()
            refs = [
                CountingCrew.start(
                    rt.hub, agents=[Agent("a", model)], orchestration=Sequential([Task("go", "a")]), crew_id=f"c{i}"
                )
                for i in range(CREWS)
            ]
            try:
                for ref in refs:
                    start_crew(ref)
                wait_until(lambda: model.in_flight == CREWS, timeout=120, what="every crew's call in flight")
                parked = threading.active_count()
                model.open()
                outcomes = [wait_finished(ref, timeout=120).result for ref in refs]
            finally:
                for ref in refs:
                    ref.stop()
    finally:
        DEFAULT_POOL.max_threads = size
    assert outcomes == ["done"] * CREWS
    bound = baseline + POOL_SIZE + 2  # the pool's threads, the I/O loop's, the pool's watchdog
    assert len(CountingCrew.seen) == CREWS and len(model.threads) == CREWS
    assert max(CountingCrew.seen) <= bound
    assert max(model.threads) <= bound
    assert parked <= bound
