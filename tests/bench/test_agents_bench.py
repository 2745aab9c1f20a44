"""``orkeon bench agents`` on a tiny run: every figure is there under its documented key,
each run in its own process, the OpenAI crews really went through the fake server. No
timing is asserted (figures are measured, never asserted: they go in the bench)."""

from __future__ import annotations

import json

import pytest

from orkeon_actors.bench import agents
from orkeon_actors.bench.agents import AgentsConfig, run_agents
from orkeon_actors.bench.agents_peers import unavailable
from orkeon_actors.bench.agents_work import runtime_awaits_async_models
from orkeon_actors.bench.registry import SUITE_NAMES, to_json

TINY = AgentsConfig(
    crews=(2, 3), latency=0.05, rounds=1, branches=2, openai_crews=3, hub_messages=500, hub_requests=100
)


def test_a_tiny_run_reports_every_figure_in_json(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "agents" in SUITE_NAMES
    monkeypatch.setattr(agents, "BLOCKING_MAX_CREWS", 2)
    awaited = runtime_awaits_async_models()
    ours = (2, 3) if awaited else (2,)  # a blocking model is not run above BLOCKING_MAX_CREWS
    peers = [p for p in TINY.peers if p not in unavailable()]
    result = run_agents(TINY)
    data = json.loads(to_json([result]))
    figures = data["agents"]
    expected = {
        "parallel_2_wall_over_latency",
        "openai_3_wall_over_latency",
        "openai_3_peak_threads",
        "openai_3_peak_in_flight",
        "openai_3_client_cpu_s",
        "openai_connection_limit",
        *(
            f"openai_aiohttp_3_{what}"
            for what in ("wall_over_latency", "peak_threads", "client_cpu_s")
            if agents.aiohttp_transport()
        ),
        "async_model",
        "post_receive_vs_tell",
        "send_reply_vs_ask",
        *(f"crews_{n}_{what}" for n in ours for what in ("wall_over_latency", "peak_threads")),
        *(f"{peer}_{n}_{what}" for peer in peers for n in (2, 3) for what in ("wall_over_latency", "peak_threads")),
        *(f"crews_{n}_vs_best_peer" for n in ours if peers),
    }
    assert set(figures) == expected
    assert all((isinstance(value, int | float) and value > 0) or key == "async_model" for key, value in figures.items())
    assert figures["async_model"] == float(awaited)
    assert ("not run above 2 crews" in result.notes) is not awaited
    assert figures["openai_connection_limit"] == 1000  # the openai SDK's default pool
    assert 1 <= figures["openai_3_peak_in_flight"] <= 3
    assert figures["crews_2_wall_over_latency"] >= 1.0  # each crew waited for its call
    # the targets are set at the N (1,000 and 10,000 crews, 8 branches); the hub's hold at any size
    assert set(data["targets"]["agents"]) == {"post_receive_vs_tell", "send_reply_vs_ask"}
