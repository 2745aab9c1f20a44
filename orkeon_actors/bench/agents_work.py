"""The work ``orkeon bench agents`` measures, one run per fresh process:

``python -m orkeon_actors.bench.agents_work WORKLOAD --n N --latency L [--base-url URL]``
prints one JSON object: ``wall_s`` (from the first crew started to the last one
finished; setting up the agents is not timed), ``peak_threads`` (the process's threads,
sampled every 10 ms while it ran), ``async_model`` (whether the runtime awaited an
``async def complete`` model) and what the workload adds (the OpenAI workloads: ``cpu_s``,
the process's CPU seconds while its crews were built and ran, and ``connection_limit``).

Workloads on this runtime (the peers' are in :mod:`orkeon_actors.bench.agents_peers`):

* ``orkeon``: N one-agent crews, one model call of ``L`` seconds each. When the runtime
  supports async models (:func:`runtime_awaits_async_models`), the model is
  ``async def complete`` awaiting ``asyncio.sleep(L)``, the same call the peers await;
  otherwise a synchronous model that blocks for ``L`` (as an SDK call does), the only
  form the runtime then has.
* ``orkeon_parallel``: one crew of N agents in ``Parallel`` branches, one call each.
* ``orkeon_openai``: N one-agent crews sharing one real ``OpenAIChatModel`` against the
  fake server at ``--base-url`` (:mod:`orkeon_actors.bench.fake_openai`), on the SDK's
  default HTTP transport (httpx); ``orkeon_openai_aiohttp``: the same on the SDK's aiohttp
  transport (``openai.DefaultAioHttpClient``, ``pip install "openai[aiohttp]"``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from orkeon_actors.crew import Agent, CrewActor, ModelRequest, ModelResponse, start_crew, wait_finished
from orkeon_actors.crew.model import Usage
from orkeon_actors.orchestration import Branch, Parallel, Sequential, Task

__all__ = ["AwaitingModel", "BlockingModel", "ThreadPeak", "measure", "runtime_awaits_async_models"]

ANSWER: Final = "done"


class BlockingModel:
    """A model whose call blocks its thread for ``latency`` seconds, as an SDK call does."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    def complete(self, request: ModelRequest) -> ModelResponse:
        time.sleep(self.latency)
        return ModelResponse(text=ANSWER, usage=Usage(10, 1, 0.0))


class AwaitingModel:
    """The async form: the call awaits ``asyncio.sleep(latency)`` (what the peers await)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.latency)
        return ModelResponse(text=ANSWER, usage=Usage(10, 1, 0.0))


def _threads() -> int:
    """The process's threads, native ones included (Linux), else Python's."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return threading.active_count()


class ThreadPeak:
    """Samples the process's thread count every ``interval`` seconds while open (the
    sampler's own thread is not counted)."""

    def __init__(self, interval: float = 0.01) -> None:
        self.peak = _threads()
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._sample, name="thread-peak", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, _threads() - 1)

    def __enter__(self) -> ThreadPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _threads())


@contextmanager
def _quiet_unawaited() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="coroutine .* was never awaited", category=RuntimeWarning)
        yield


def runtime_awaits_async_models() -> bool:
    """Whether this runtime runs a model whose ``complete`` is a coroutine function: one
    crew asks such a model once; true when the crew completes with its answer (a runtime
    without the async form fails the agent on the coroutine object it gets)."""
    from orkeon_actors.runtime import Runtime

    with _quiet_unawaited(), Runtime.start() as rt:
        agent = Agent("a", AwaitingModel(0.0))
        ref = CrewActor.start(rt.hub, agents=[agent], orchestration=Sequential([Task("go", "a")]), crew_id="probe")
        try:
            start_crew(ref)
            try:
                outcome = wait_finished(ref, timeout=30)
            except Exception:  # the old runtime fails the agent: that is the answer
                return False
            return outcome.result == ANSWER
        finally:
            ref.stop()


def _model(latency: float, async_model: bool) -> Any:
    return AwaitingModel(latency) if async_model else BlockingModel(latency)


def _run_crews(refs: list[Any], timeout: float) -> float:
    started = time.perf_counter()
    for ref in refs:
        start_crew(ref)
    for ref in refs:
        outcome = wait_finished(ref, timeout=timeout)
        if outcome.result != ANSWER and ANSWER not in str(outcome.result):
            raise RuntimeError(f"a crew answered {outcome.result!r}, not {ANSWER!r}")
    return time.perf_counter() - started


def _one_agent_crews(n: int, model_for: Callable[[], Any], latency: float) -> tuple[float, int]:
    from orkeon_actors.runtime import Runtime

    with Runtime.start() as rt:
        refs = [
            CrewActor.start(
                rt.hub, agents=[Agent("a", model_for())], orchestration=Sequential([Task("go", "a")]), crew_id=f"c{i}"
            )
            for i in range(n)
        ]
        try:
            with ThreadPeak() as threads:
                wall = _run_crews(refs, timeout=600 + 10 * latency)
        finally:
            for ref in refs:
                ref.stop()
    return wall, threads.peak


def _parallel_crew(n: int, latency: float, async_model: bool) -> tuple[float, int]:
    from orkeon_actors.runtime import Runtime

    with Runtime.start() as rt:
        agents = [Agent(f"a{i}", _model(latency, async_model)) for i in range(n)]
        branches = [Branch(f"b{i}", f"a{i}", "go") for i in range(n)]
        ref = CrewActor.start(rt.hub, agents=agents, orchestration=Parallel(branches), crew_id="parallel")
        try:
            with ThreadPeak() as threads:
                started = time.perf_counter()
                start_crew(ref)
                wait_finished(ref, timeout=600 + 10 * n * latency)
                wall = time.perf_counter() - started
        finally:
            ref.stop()
    return wall, threads.peak


def measure(workload: str, n: int, latency: float, base_url: str | None = None) -> dict[str, Any]:
    """Run ``workload`` here and return its figures (module docstring)."""
    extra: dict[str, Any] = {}
    async_model = workload.startswith("orkeon") and runtime_awaits_async_models()
    if workload == "orkeon":
        wall, peak = _one_agent_crews(n, lambda: _model(latency, async_model), latency)
    elif workload == "orkeon_parallel":
        wall, peak = _parallel_crew(n, latency, async_model)
    elif workload in ("orkeon_openai", "orkeon_openai_aiohttp"):
        import openai

        from orkeon_actors.models.openai_chat import OpenAIChatModel

        if base_url is None:
            raise ValueError(f"the {workload} workload needs --base-url (the fake server)")
        timeout = 600 + 10 * latency
        client = None
        if workload == "orkeon_openai_aiohttp":  # the SDK's aiohttp transport (openai[aiohttp])
            http = openai.DefaultAioHttpClient(timeout=timeout)
            client = openai.AsyncOpenAI(api_key="bench", base_url=base_url, http_client=http)
        shared = OpenAIChatModel("fake", api_key="bench", base_url=base_url, timeout=timeout, client=client)
        cpu = time.process_time()
        wall, peak = _one_agent_crews(n, lambda: shared, latency)
        extra["cpu_s"] = time.process_time() - cpu
        extra["connection_limit"] = openai.DEFAULT_CONNECTION_LIMITS.max_connections
    else:
        from orkeon_actors.bench.agents_peers import PEERS

        wall, peak, extra = PEERS[workload](n, latency)
        async_model = True  # the peers' agents await the call
    return {
        "workload": workload,
        "n": n,
        "latency_s": latency,
        "wall_s": wall,
        "peak_threads": peak,
        "async_model": async_model,
        **extra,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one measured run of orkeon bench agents")
    parser.add_argument("workload")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--latency", type=float, required=True)
    parser.add_argument("--base-url")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.workload, args.n, args.latency, args.base_url)), flush=True)


if __name__ == "__main__":
    main()
