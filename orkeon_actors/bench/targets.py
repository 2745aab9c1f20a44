"""The figure each benchmark key must reach, and whether a run met it.

Targets are the ones ``docs/bench.md`` states (ratios against a baseline measured in the
same run, or absolute latencies and rates of the lifecycle at scale). A key without a
target is reported without a verdict. ``orkeon bench`` marks a missed target with ✗, puts
``{"target": ..., "met": ...}`` per key in ``--json``, and exits 1 with ``--check``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import attrs

from orkeon_actors.bench.registry import BenchResult

__all__ = ["TARGETS", "Target", "Verdict", "evaluate"]


@attrs.frozen
class Target:
    comparison: str  # ">=", "<" or "<="
    value: float

    def met_by(self, figure: float) -> bool:
        compare: Callable[[float, float], bool] = _COMPARE[self.comparison]
        return compare(figure, self.value)

    def __str__(self) -> str:
        return f"{_SHOWN[self.comparison]} {self.value:g}"


_COMPARE: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<": operator.lt, "<=": operator.le}
_SHOWN = {">=": "≥", "<": "<", "<=": "≤"}


TARGETS: dict[str, dict[str, Target]] = {
    "hub": {
        "post_receive_vs_tell": Target(">=", 0.60),
        "send_reply_vs_ask": Target(">=", 0.75),
        "wait_cost_ratio_memory": Target("<=", 1.5),
        "wait_cost_ratio_sqlite": Target("<=", 1.5),
        "stop_waits_s": Target("<", 1.0),
        # Full fidelity is reported, not targeted; what users run in production is.
        "post_receive_production_vs_unstaged": Target(">=", 0.50),
        "send_reply_production_vs_autogen": Target(">=", 1.5),
        "post_receive_production_vs_autogen": Target(">=", 5.0),
        "send_reply_full_sampling_vs_autogen": Target(">=", 1.5),
        "post_receive_full_sampling_vs_autogen": Target(">=", 5.0),
    },
    "store": {"durable_post_vs_raw": Target(">=", 0.50)},
    "history": {
        "sent_p95_s": Target("<", 1.0),
        "sent_vs_ls_p95": Target("<", 2.0),
        "unreadable_ls_refused": Target(">=", 1.0),
        "write_cost_ratio_100k_vs_10": Target("<", 1.5),
    },
    "amqp": {
        "post_receive_vs_raw": Target(">=", 0.70),
        "send_reply_vs_raw_rpc": Target(">=", 0.50),
        "expiry_scale_out": Target(">=", 1.8),
        "wake_scale_out": Target(">=", 1.8),
    },
    "lifecycle": {
        "boot_ms": Target("<", 3000),
        "boot_rss_mb": Target("<", 300),
        "wake_latency_p99_ms": Target("<", 10),
        "wake_loaded_p99_ms": Target("<", 10),
        "expiries_per_s": Target(">=", 2000),
        "parked_crew_kb": Target("<=", 8),
        "parked_crew_start_ms": Target("<=", 0.5),
    },
    "wakecost": {"steps_us": Target("<=", 250)},
    "agents": {
        "parallel_8_wall_over_latency": Target("<=", 1.2),
        **{
            key: target
            for n in (1_000, 10_000)
            for key, target in (
                (f"crews_{n}_wall_over_latency", Target("<=", 1.2)),
                (f"crews_{n}_peak_threads", Target("<", 32)),
                (f"crews_{n}_vs_best_peer", Target("<=", 1.0)),
            )
        },
        "post_receive_vs_tell": Target(">=", 0.40),
        "send_reply_vs_ask": Target(">=", 0.50),
    },
    "a2a": {"round_trip_vs_bare_sdk": Target(">=", 0.7)},
    "pauseresume": {
        f"{name}_{paused}": target
        for paused in (2_000, 20_000)
        for name, target in (
            ("resume_throughput_vs_langgraph", Target(">=", 2)),
            ("resume_p99_vs_langgraph", Target("<=", 1)),
            ("disk_per_paused_vs_langgraph", Target("<=", 1)),
        )
    },
}


@attrs.frozen
class Verdict:
    target: Target
    met: bool


def evaluate(result: BenchResult) -> dict[str, Verdict]:
    """The verdict on every figure of ``result`` that has a target."""
    targets = TARGETS.get(result.suite, {})
    return {key: Verdict(t, t.met_by(result.figures[key])) for key, t in targets.items() if key in result.figures}
