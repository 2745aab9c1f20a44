"""``orkeon bench agents``: agents at model speed (docs/bench.md, "agents").

Every agent run is a fresh process (:mod:`orkeon_actors.bench.agents_work`), so no run
inherits another's threads, caches or garbage; the runs of one round are interleaved
(this runtime, then each peer, at each N), and each figure is the median over rounds.

* ``parallel_{B}_wall_over_latency``: one crew, ``B`` (8) ``Parallel`` branches, one model
  call of latency ``L`` each: wall / L (1.0 is ideal: the calls overlap).
* ``crews_{N}_wall_over_latency`` / ``crews_{N}_peak_threads``: N one-agent crews, one
  call each. With a runtime that awaits async models the model awaits
  ``asyncio.sleep(L)``; without, it blocks for ``L`` (the only form there is then);
  ``async_model`` (1 or 0) says which ran.
* ``{peer}_{N}_wall_over_latency`` / ``{peer}_{N}_peak_threads`` for autogen-core,
  LangGraph and the Microsoft Agent Framework (:mod:`orkeon_actors.bench.agents_peers`),
  their agents awaiting the same call; ``crews_{N}_vs_best_peer``: our wall over the best
  peer's (≤ 1 is no worse).
* ``openai_{N}_*``: N crews sharing one real ``OpenAIChatModel`` against a local fake
  OpenAI-compatible server (:mod:`orkeon_actors.bench.fake_openai`, its own process)
  answering after ``L``: wall / L, peak threads, the client process's CPU seconds, the
  SDK's connection limit (``openai.DEFAULT_CONNECTION_LIMITS``) and the most calls the
  server held at once; ``openai_aiohttp_{N}_*`` the same on the SDK's aiohttp transport
  (when ``openai[aiohttp]`` is installed).
* ``post_receive_vs_tell`` / ``send_reply_vs_ask``: the hub's two ratios
  (:mod:`orkeon_actors.bench.hub`), measured here so a change to the agent loop is seen
  beside them.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import urllib.request
from typing import Any, Final

import attrs

from orkeon_actors.bench.baseline import raw_ask_per_second, raw_tell_per_second
from orkeon_actors.bench.context import progress
from orkeon_actors.bench.hub import post_receive_per_second, send_reply_per_second
from orkeon_actors.bench.registry import BenchResult, register

__all__ = ["FULL", "QUICK", "AgentsConfig", "bench_agents", "run_agents"]

PEER_NAMES: Final = ("autogen", "langgraph", "maf")
NO_AIOHTTP: Final = "; the aiohttp transport was not measured (pip install 'openai[aiohttp]')"
BLOCKING_MAX_CREWS: Final = 2_000
"""The most one-agent crews run with a blocking model (a runtime without async models):
each call in flight holds a thread, and 10,000 of them took over 16 minutes under load on
a 2-core machine and disturbed everything else on it. Larger N are then not run for our
crews (their figures are absent, the notes say so); the peers still run."""


@attrs.frozen
class AgentsConfig:
    """What one run of the suite measures (``FULL`` and ``QUICK`` below)."""

    crews: tuple[int, ...]
    latency: float
    rounds: int
    branches: int = 8
    openai_crews: int = 1_000
    peers: tuple[str, ...] = PEER_NAMES
    hub_messages: int = 20_000
    hub_requests: int = 4_000


FULL: Final = AgentsConfig(crews=(1_000, 10_000), latency=2.0, rounds=3)
QUICK: Final = AgentsConfig(crews=(100,), latency=0.5, rounds=1, openai_crews=100)
"""The hub's ratios keep their counts: fewer messages make them noise."""


def _fresh(workload: str, n: int, latency: float, base_url: str | None = None) -> dict[str, Any]:
    """One run of ``workload`` in a new interpreter (its JSON line)."""
    command = [
        sys.executable,
        "-m",
        "orkeon_actors.bench.agents_work",
        workload,
        "--n",
        str(n),
        "--latency",
        str(latency),
    ]
    if base_url is not None:
        command += ["--base-url", base_url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1_800 + 20 * latency, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"orkeon bench agents: {workload} at N={n} failed:\n{done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def aiohttp_transport() -> bool:
    """Whether the openai SDK's aiohttp transport is installed (``openai[aiohttp]``)."""
    return importlib.util.find_spec("httpx_aiohttp") is not None and importlib.util.find_spec("aiohttp") is not None


def _through_openai(n: int, latency: float, workload: str = "orkeon_openai") -> dict[str, Any]:
    """``workload`` (``orkeon_openai`` or ``orkeon_openai_aiohttp``) at ``n`` against a
    fake server started for this run."""
    server = subprocess.Popen(
        [sys.executable, "-m", "orkeon_actors.bench.fake_openai", "--latency", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        figures = _fresh(workload, n, latency, base_url=f"{url}/v1")
        with urllib.request.urlopen(f"{url}/stats", timeout=30) as answer:
            figures.update({f"server_{k}": v for k, v in json.loads(answer.read()).items()})
        if figures["server_requests"] != n:
            raise RuntimeError(f"the fake server answered {figures['server_requests']} calls for {n} crews")
        return figures
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=60)


def _hub_ratios(config: AgentsConfig) -> tuple[float, float]:
    post, send = [], []
    for _ in range(max(config.rounds, 3)):
        post.append(post_receive_per_second(config.hub_messages) / raw_tell_per_second(config.hub_messages))
        send.append(send_reply_per_second(config.hub_requests) / raw_ask_per_second(config.hub_requests))
    return statistics.median(post), statistics.median(send)


def run_agents(config: AgentsConfig) -> BenchResult:
    """Measure ``config`` (module docstring for every key)."""
    from orkeon_actors.bench.agents_peers import unavailable

    missing = unavailable()
    peers = [p for p in config.peers if p not in missing]
    latency = config.latency
    ours: list[int] = []
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}

    openai_workloads = ("orkeon_openai", "orkeon_openai_aiohttp") if aiohttp_transport() else ("orkeon_openai",)

    def add(workload: str, n: int, figures: dict[str, Any]) -> None:
        runs.setdefault((workload, n), []).append(figures)

    for index in range(config.rounds):
        progress(f"round {index + 1}/{config.rounds}: {config.branches} parallel branches")
        parallel = _fresh("orkeon_parallel", config.branches, latency)
        add("orkeon_parallel", config.branches, parallel)
        if index == 0:  # the first run says which model form the runtime has (agents_work probes it)
            ours = [n for n in config.crews if parallel["async_model"] or n <= BLOCKING_MAX_CREWS]
        for n in config.crews:
            for workload in ("orkeon", *peers) if n in ours else peers:
                progress(f"round {index + 1}/{config.rounds}: {workload} at N={n}")
                add(workload, n, _fresh(workload, n, latency))
        for workload in openai_workloads:
            progress(f"round {index + 1}/{config.rounds}: OpenAIChatModel ({workload}) at N={config.openai_crews}")
            add(workload, config.openai_crews, _through_openai(config.openai_crews, latency, workload))

    def wall(workload: str, n: int) -> float:
        return float(statistics.median(r["wall_s"] for r in runs[(workload, n)])) / latency

    def threads(workload: str, n: int) -> float:
        return float(max(r["peak_threads"] for r in runs[(workload, n)]))

    figures: dict[str, float] = {}
    units: dict[str, str] = {}
    key = f"parallel_{config.branches}_wall_over_latency"
    figures[key], units[key] = wall("orkeon_parallel", config.branches), "wall / L"
    for n in config.crews:
        if n in ours:
            figures[f"crews_{n}_wall_over_latency"] = wall("orkeon", n)
            figures[f"crews_{n}_peak_threads"] = threads("orkeon", n)
            units[f"crews_{n}_wall_over_latency"], units[f"crews_{n}_peak_threads"] = "wall / L", "threads"
        for peer in peers:
            figures[f"{peer}_{n}_wall_over_latency"], units[f"{peer}_{n}_wall_over_latency"] = wall(peer, n), "wall / L"
            figures[f"{peer}_{n}_peak_threads"], units[f"{peer}_{n}_peak_threads"] = threads(peer, n), "threads"
        if peers and n in ours:
            best = min(wall(peer, n) for peer in peers)
            figures[f"crews_{n}_vs_best_peer"] = wall("orkeon", n) / best
            units[f"crews_{n}_vs_best_peer"] = "our wall / best peer's (<= 1: no worse)"
    n = config.openai_crews
    openai = runs[("orkeon_openai", n)]
    figures[f"openai_{n}_wall_over_latency"], units[f"openai_{n}_wall_over_latency"] = (
        wall("orkeon_openai", n),
        "wall / L",
    )
    figures[f"openai_{n}_peak_threads"], units[f"openai_{n}_peak_threads"] = threads("orkeon_openai", n), "threads"
    figures[f"openai_{n}_peak_in_flight"] = float(max(r["server_peak_in_flight"] for r in openai))
    units[f"openai_{n}_peak_in_flight"] = "calls the server held at once"
    figures[f"openai_{n}_client_cpu_s"] = float(statistics.median(r["cpu_s"] for r in openai))
    units[f"openai_{n}_client_cpu_s"] = "CPU seconds of the client process (load-independent)"
    figures["openai_connection_limit"] = float(openai[0]["connection_limit"])
    units["openai_connection_limit"] = "connections (the SDK's pool limit)"
    if ("orkeon_openai_aiohttp", n) in runs:
        aio = runs[("orkeon_openai_aiohttp", n)]
        figures[f"openai_aiohttp_{n}_wall_over_latency"] = wall("orkeon_openai_aiohttp", n)
        units[f"openai_aiohttp_{n}_wall_over_latency"] = "wall / L (the SDK's aiohttp transport)"
        figures[f"openai_aiohttp_{n}_peak_threads"] = threads("orkeon_openai_aiohttp", n)
        units[f"openai_aiohttp_{n}_peak_threads"] = "threads"
        figures[f"openai_aiohttp_{n}_client_cpu_s"] = float(statistics.median(r["cpu_s"] for r in aio))
        units[f"openai_aiohttp_{n}_client_cpu_s"] = "CPU seconds of the client process (aiohttp transport)"
    async_model = all(r["async_model"] for (w, _), rs in runs.items() if w.startswith("orkeon") for r in rs)
    figures["async_model"], units["async_model"] = float(async_model), "1: async models awaited, 0: blocking model"
    progress("the hub's ratios")
    post, send = _hub_ratios(config)
    figures["post_receive_vs_tell"], units["post_receive_vs_tell"] = post, "ratio (hub, target >= 0.40)"
    figures["send_reply_vs_ask"], units["send_reply_vs_ask"] = send, "ratio (hub, target >= 0.50)"
    model = "an async model awaiting asyncio.sleep(L)" if async_model else "a blocking model (time.sleep(L))"
    not_run = [n for n in config.crews if n not in ours]
    if not_run:
        model += f" (not run above {BLOCKING_MAX_CREWS:,} crews with a blocking model: N={not_run})"
    skipped = "".join(f"; {peer} skipped: {why}" for peer, why in missing.items() if peer in config.peers)
    return BenchResult(
        "agents",
        figures,
        units,
        notes=(
            f"L = {latency:g} s, medians of {config.rounds} interleaved rounds, each run a fresh process; our crews "
            f"ran {model}; peak threads are the process's (sampled every 10 ms); the OpenAI crews share one "
            f"OpenAIChatModel against the fake server in its own process; at N = 1,000 their wall is the "
            f"client's CPU (openai_*_client_cpu_s: the SDK's per-call work on the one I/O loop thread, its httpx "
            f"pool rescanning every connection per request) times the machine's load, not the connection "
            f"limit{'' if aiohttp_transport() else NO_AIOHTTP}{skipped}"
        ),
    )


@register("agents")
def bench_agents(quick: bool) -> BenchResult:
    """The suite as ``orkeon bench agents`` runs it."""
    return run_agents(QUICK if quick else FULL)
