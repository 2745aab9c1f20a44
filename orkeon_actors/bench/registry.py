"""The benchmark suites and how their results are reported."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["BenchResult", "SUITES", "register", "run_suites", "render_table", "best_of"]


@attrs.frozen
class BenchResult:
    """One suite's figures: ``figures`` maps a stable key to a number; ``units`` maps
    the same keys to a short unit; ``notes`` says how it was measured."""

    suite: str
    figures: dict[str, float]
    units: dict[str, str]
    notes: str = ""


SuiteFn = Callable[[bool], BenchResult]
SUITES: dict[str, SuiteFn] = {}


def register(name: str) -> Callable[[SuiteFn], SuiteFn]:
    def deco(fn: SuiteFn) -> SuiteFn:
        SUITES[name] = fn
        return fn

    return deco


def best_of(repeats: int, measure: Callable[[], float]) -> float:
    """The best of ``repeats`` runs of a throughput measurement (higher is better):
    the least disturbed by the rest of the machine."""
    return max(measure() for _ in range(repeats))


def run_suites(names: list[str], quick: bool) -> list[BenchResult]:
    # Import the suites so they register themselves.
    from orkeon_actors.bench import (
        hub,  # noqa: F401
        lifecycle,  # noqa: F401
        sim,  # noqa: F401
        store,  # noqa: F401
        wake_cost,  # noqa: F401
    )

    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise SystemExit(f"unknown bench suite(s) {unknown}; available: {sorted(SUITES)}")
    return [SUITES[name](quick) for name in names]


def to_json(results: list[BenchResult]) -> str:
    payload: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for result in results:
        payload[result.suite] = {key: round(value, 4) for key, value in result.figures.items()}
    return json.dumps(payload, indent=2, sort_keys=False)


def render_table(results: list[BenchResult]) -> str:
    lines = []
    for result in results:
        lines.append(f"== {result.suite} ==")
        width = max(len(k) for k in result.figures)
        for key, value in result.figures.items():
            unit = result.units.get(key, "")
            text = f"{value:,.3f}" if value < 100 else f"{value:,.0f}"
            lines.append(f"  {key.ljust(width)}  {text:>14} {unit}")
        if result.notes:
            lines.append(f"  ({result.notes})")
    return "\n".join(lines)
