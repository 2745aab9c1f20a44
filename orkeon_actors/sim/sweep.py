"""Seed sweeps: run one crew under many seeds, check invariants, sort the outcomes into classes.

``orkeon simulate MODE --seeds 1..500 --check NAME`` is :func:`sweep` over the mode's
example (:data:`~orkeon_actors.sim.examples.INVARIANTS`); tests sweep their own crews.
Each seed runs in a fresh :class:`~orkeon_actors.sim.Simulation`, so a seed's outcome
depends on nothing but the seed (and the faults asked for): the first seed of every class
reproduces it exactly with ``--seed N`` (:func:`run_seed`).

An outcome is ``completed: RESULT``, ``failed: FAILURE``, the crew's status if it did not
finish before ``until``, or ``violated NAME: WHAT`` when an invariant did not hold (the
violation is the outcome then, whatever the crew's status).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

import attrs

from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.sim.faults import Faults
from orkeon_actors.sim.simulation import Simulation

__all__ = ["OutcomeClass", "SeedRun", "parse_seeds", "run_seed", "sweep"]

Build = Callable[[Simulation], str]
Check = Callable[[Simulation, str], "str | None"]


@attrs.frozen
class SeedRun:
    """One seed's run: its outcome, the violations found, and its trace as JSON."""

    seed: int
    outcome: str
    violations: tuple[str, ...]
    trace_json: str

    @property
    def ok(self) -> bool:
        return not self.violations


@attrs.frozen
class OutcomeClass:
    outcome: str
    count: int
    first_seed: int
    violated: bool


def parse_seeds(text: str) -> range:
    """``"1..500"`` (inclusive) or ``"7"``; raises ``ValueError`` saying what to write."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?", text)
    if match is None:
        raise ValueError(f"--seeds takes FIRST..LAST (inclusive, e.g. 1..500) or one seed, got {text!r}")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise ValueError(f"--seeds {text}: the last seed is before the first")
    return range(first, last + 1)


def run_seed(
    build: Build,
    seed: int,
    checks: Mapping[str, Check] | None = None,
    *,
    faults: Faults | None = None,
    until: float = 3600.0,
) -> SeedRun:
    """Run ``build``'s crew under ``seed``; check ``checks`` on the finished run."""
    with Simulation(seed=seed, faults=faults) as sim:
        crew = build(sim)
        result = sim.run(until=until)
        status, value, failure = result.crews[crew]
        violations = []
        for name, check in (checks or {}).items():
            problem = check(sim, crew)
            if problem is not None:
                violations.append(f"violated {name}: {problem}")
        if violations:
            outcome = violations[0]
        elif status is CrewStatus.COMPLETED:
            outcome = f"completed: {value}"
        elif status is CrewStatus.FAILED:
            outcome = f"failed: {failure}"
        else:
            outcome = f"{status.value} at t={result.virtual_time:g}s"
        return SeedRun(seed, outcome, tuple(violations), sim.trace.to_json())


def sweep(
    build: Build,
    seeds: Iterable[int],
    checks: Mapping[str, Check] | None = None,
    *,
    faults: Faults | None = None,
    until: float = 3600.0,
    on_seed: Callable[[SeedRun], None] | None = None,
) -> list[OutcomeClass]:
    """Run every seed; the outcome classes, most frequent first (then by first seed)."""
    counts: dict[str, list[int]] = {}
    violated: dict[str, bool] = {}
    for seed in seeds:
        run = run_seed(build, seed, checks, faults=faults, until=until)
        if on_seed is not None:
            on_seed(run)
        entry = counts.setdefault(run.outcome, [0, seed])
        entry[0] += 1
        violated[run.outcome] = not run.ok
    classes = [OutcomeClass(o, n, first, violated[o]) for o, (n, first) in counts.items()]
    return sorted(classes, key=lambda c: (-c.count, c.first_seed))
