"""The benchmark suites and how their results are reported."""

from __future__ import annotations

import importlib
import json
import platform
from collections.abc import Callable
from typing import Any

import attrs

from orkeon_actors.bench.context import progress
from orkeon_actors.errors import ExtraNotInstalledError, InvalidArgumentError
from orkeon_actors.model.clock import SystemClock, format_utc

__all__ = [
    "BenchResult",
    "EXTRA_OF_MODULE",
    "SUITES",
    "SUITE_MODULES",
    "SUITE_NAMES",
    "best_of",
    "load_suite",
    "register",
    "render_table",
    "run_suites",
]

SUITE_NAMES = ("hub", "store", "sim", "lifecycle", "wakecost", "history", "amqp", "pauseresume", "agents", "a2a")
"""Every suite ``orkeon bench`` knows, in the order ``all`` runs them."""


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


SUITE_MODULES: dict[str, str] = {
    "hub": "hub",
    "store": "store",
    "sim": "sim",
    "lifecycle": "lifecycle",
    "wakecost": "wake_cost",
    "history": "history",
    "amqp": "amqp",
    "pauseresume": "pause_resume",
    "agents": "agents",
    "a2a": "a2a",
}
"""The module of ``orkeon_actors.bench`` that registers each suite: only the suites a
run names are imported, so a suite's optional dependency is needed by that suite alone."""

EXTRA_OF_MODULE: dict[str, str] = {
    "pika": "amqp",
    "autogen_core": "bench",
    "langgraph": "bench",
    "a2a": "a2a",
    "uvicorn": "a2a",
}
"""The ``orkeon-actors`` extra that installs each optional dependency a suite imports."""


def load_suite(name: str) -> SuiteFn:
    """The suite ``name`` (registered, or its module imported now). Raises ``InvalidArgumentError`` for
    an unknown name, and :class:`~orkeon_actors.errors.ExtraNotInstalledError` naming
    the extra to install when the suite needs an optional dependency that is missing."""
    if name in SUITES:
        return SUITES[name]
    if name not in SUITE_MODULES:
        raise InvalidArgumentError(f"unknown bench suite {name!r}; choose from: {', '.join(SUITE_NAMES)}")
    try:
        importlib.import_module(f"orkeon_actors.bench.{SUITE_MODULES[name]}")
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        extra = EXTRA_OF_MODULE.get(missing)
        if extra is None:
            raise
        raise ExtraNotInstalledError(
            f"the {name} suite needs {missing}, which is not installed: pip install 'orkeon-actors[{extra}]'",
            extra=extra,
        ) from None
    return SUITES[name]


def run_suites(names: list[str], quick: bool) -> list[BenchResult]:
    """Run the suites ``names`` in order (see :mod:`orkeon_actors.bench.context` for where
    their stores go and how progress is reported). Each suite's module is imported first
    (:func:`load_suite`), so a missing extra or an unknown name is reported before any
    suite runs."""
    suites = [load_suite(name) for name in names]
    results = []
    for index, (name, suite) in enumerate(zip(names, suites, strict=True)):
        progress(f"suite {name} ({index + 1}/{len(names)})")
        results.append(suite(quick))
    return results


def to_json(results: list[BenchResult]) -> str:
    """One JSON object: the machine, when, each suite's figures by key, and ``targets``:
    per suite, ``{key: {"target": "≥ 0.4", "met": true}}`` for every key with a target."""
    from orkeon_actors.bench.targets import evaluate

    payload: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "measured_at": format_utc(SystemClock().now()),
    }
    targets: dict[str, Any] = {}
    for result in results:
        payload[result.suite] = {key: round(value, 4) for key, value in result.figures.items()}
        verdicts = evaluate(result)
        if verdicts:
            targets[result.suite] = {k: {"target": str(v.target), "met": v.met} for k, v in verdicts.items()}
    payload["targets"] = targets
    return json.dumps(payload, indent=2, sort_keys=False, ensure_ascii=False)


def missed_targets(results: list[BenchResult]) -> list[str]:
    """``suite.key`` of every figure that missed its target."""
    from orkeon_actors.bench.targets import evaluate

    return [f"{r.suite}.{key}" for r in results for key, v in evaluate(r).items() if not v.met]


def render_table(results: list[BenchResult]) -> str:
    """A table per suite; a figure with a target shows it, ✓ when met and ✗ when missed."""
    from orkeon_actors.bench.targets import evaluate

    lines = []
    for result in results:
        lines.append(f"== {result.suite} ==")
        width = max(len(k) for k in result.figures)
        verdicts = evaluate(result)
        for key, value in result.figures.items():
            unit = result.units.get(key, "")
            text = f"{value:,.3f}" if value < 100 else f"{value:,.0f}"
            verdict = verdicts.get(key)
            mark = "" if verdict is None else f"  {'✓' if verdict.met else '✗'} target {verdict.target}"
            lines.append(f"  {key.ljust(width)}  {text:>14} {unit}{mark}".rstrip())
        if result.notes:
            lines.append(f"  ({result.notes})")
    return "\n".join(lines)
