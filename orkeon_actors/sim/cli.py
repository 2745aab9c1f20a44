"""``orkeon simulate MODE``: run mode examples, print, draw and sweep them.

* ``orkeon simulate graph [--seed N]``: the timeline, with one lane per crew;
* ``all``: the six modes together in one simulation (their crews run concurrently);
* ``--html run.html`` one self-contained HTML file (:mod:`orkeon_actors.sim.html`),
  ``--trace run.json`` the Chrome trace format (:mod:`orkeon_actors.sim.chrome`),
  ``--json`` the raw trace entries on stdout instead of the timeline;
* ``--faults delay=0.2,model_errors=0.05`` seeded fault injection (:mod:`orkeon_actors.sim.faults`);
* ``--seeds 1..500 --check NAME`` a sweep: outcome classes with the first seed of each
  (:mod:`orkeon_actors.sim.sweep`); exit 1 if a seed violated the invariant.
"""

from __future__ import annotations

from pathlib import Path

from orkeon_actors.sim.chrome import to_chrome_trace
from orkeon_actors.sim.examples import EXAMPLES, INVARIANTS
from orkeon_actors.sim.faults import Faults
from orkeon_actors.sim.html import to_html
from orkeon_actors.sim.simulation import Simulation
from orkeon_actors.sim.sweep import parse_seeds, sweep

__all__ = ["run_simulate"]


def run_simulate(
    example: str = "all",
    *,
    seed: int = 0,
    seeds: str | None = None,
    check: str | None = None,
    faults: str | None = None,
    html: str | None = None,
    trace: str | None = None,
    as_json: bool = False,
    until: float = 3600.0,
) -> int:
    """The ``simulate`` command (module docstring). 0 if every crew completed (or, with
    ``--seeds``, no seed violated ``--check``), 1 otherwise, 2 for a usage error."""
    if example != "all" and example not in EXAMPLES:
        print(f"unknown mode {example!r}; choose one of: all, {', '.join(EXAMPLES)}")
        return 2
    try:
        fault_spec = Faults.parse(faults) if faults else None
        seed_range = parse_seeds(seeds) if seeds is not None else None
    except ValueError as exc:
        print(exc)
        return 2
    if seed_range is not None:
        return _sweep(example, seed_range, check, fault_spec, faults, until)
    if check is not None:
        print("--check needs --seeds FIRST..LAST (to check one seed: --seeds N --check NAME)")
        return 2
    names = list(EXAMPLES) if example == "all" else [example]
    with Simulation(seed=seed, faults=fault_spec) as sim:
        crews = {EXAMPLES[name](sim): name for name in names}
        result = sim.run(until=until)
        events = sim.trace.events()
        if html is not None:
            Path(html).write_text(to_html(events, title=f"orkeon simulate {example} --seed {seed}"), encoding="utf-8")
        if trace is not None:
            Path(trace).write_text(to_chrome_trace(events), encoding="utf-8")
        if as_json:
            print(sim.trace.to_json())
            return 0 if result.all_completed else 1
        title = ", ".join(names)
        print(f"== {title} (seed {seed}, {len(events)} events, {result.virtual_time:g}s virtual)")
        print(sim.trace.timeline())
        for crew, name in crews.items():
            status, value, failure = result.crews[crew]
            print(f"-> {status.value}: {value if failure is None else failure}  ({name}, crew {crew})")
        for path, what in ((html, "HTML"), (trace, "Chrome trace")):
            if path is not None:
                print(f"{what} written to {path}")
        return 0 if result.all_completed else 1


def _sweep(
    example: str, seeds: range, check: str | None, faults: Faults | None, faults_text: str | None, until: float
) -> int:
    if example == "all":
        print("--seeds sweeps one mode at a time; name it: " + ", ".join(EXAMPLES))
        return 2
    known = INVARIANTS[example]
    if check is not None and check != "all" and check not in known:
        print(f"unknown invariant {check!r} for {example}; choose one of: all, {', '.join(known)}")
        return 2
    checks = known if check in (None, "all") else {check: known[check]}
    classes = sweep(EXAMPLES[example], seeds, checks, faults=faults, until=until)
    print(f"{example}: {len(seeds)} seeds ({seeds.start}..{seeds.stop - 1}), checked: {', '.join(checks)}")
    for cls in classes:
        mark = "✗" if cls.violated else " "
        print(f"{mark} {cls.count:>5}  first seed {cls.first_seed:<6} {cls.outcome}")
    bad = [c for c in classes if c.violated]
    if bad:
        again = "" if faults_text is None else f" --faults {faults_text}"
        print(f"reproduce with: orkeon simulate {example} --seed {bad[0].first_seed}{again}")
        return 1
    return 0
