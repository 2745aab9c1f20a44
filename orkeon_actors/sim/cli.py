"""``orkeon simulate [example]``: run mode examples and print readable timelines."""

from __future__ import annotations

from orkeon_actors.sim.examples import EXAMPLES, run_example

__all__ = ["run_simulate"]


def run_simulate(example: str = "all", *, seed: int = 0) -> int:
    """Print the timeline of ``example`` (or of every example); 0 if all completed,
    1 if one failed, 2 for an unknown name."""
    names = list(EXAMPLES) if example == "all" else [example]
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        print(f"unknown example {unknown[0]!r}; choose one of: all, {', '.join(EXAMPLES)}")
        return 2
    code = 0
    for name in names:
        sim, crew = run_example(name, seed=seed)
        try:
            status, result, failure = sim.result().crews[crew]
            print(f"== {name} (crew {crew}, {len(sim.trace)} events, {sim.result().virtual_time:g}s virtual)")
            print(sim.trace.timeline())
            print(f"-> {status.value}: {result if failure is None else failure}\n")
            code = code or (0 if failure is None else 1)
        finally:
            sim.stop()
    return code
