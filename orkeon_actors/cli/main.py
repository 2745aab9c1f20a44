"""``orkeon``: demo, bench.

orkeon demo                   a short scripted exchange between agents, narrated
orkeon bench hub [--json]     hub throughput beside raw pykka, as ratios
orkeon simulate [mode]        run one orchestration-mode example (or all) on a seeded, deterministic
                              scheduler: timeline, --html, --trace, --json, --faults, --seeds A..B --check
orkeon crew schema|validate|run   the canonical crew schema, validating and running crew YAML
orkeon studio --store PATH    the Studio web view of a store file, read-only
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orkeon", description="orkeon_actors command line")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the runtime's debug logs to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", help="agents exchanging messages on the durable hub, then a multi-crew simulation"
    )
    demo.add_argument("--no-color", action="store_true", help="plain output")
    demo.add_argument("--store", metavar="PATH", help="SQLite store file (default: a fresh temporary file)")

    simulate = sub.add_parser("simulate", help="run an orchestration-mode example on a virtual clock")
    simulate.add_argument(
        "example",
        nargs="?",
        default="all",
        help="sequential, hierarchical, parallel, consensual, graph, autonomous, or all (default: the six together)",
    )
    simulate.add_argument(
        "--seed", type=int, default=0, help="the seed: it orders deliveries ready at one instant and draws faults"
    )
    simulate.add_argument("--seeds", metavar="A..B", help="sweep seeds A to B (inclusive) and print outcome classes")
    simulate.add_argument("--check", metavar="INVARIANT", help="with --seeds: the mode's invariant to check (or all)")
    simulate.add_argument("--faults", metavar="SPEC", help="fault probabilities, e.g. delay=0.3,model_errors=0.05")
    simulate.add_argument("--html", metavar="PATH", help="write a self-contained HTML view of the run")
    simulate.add_argument("--trace", metavar="PATH", help="write the run in the Chrome trace format (Perfetto)")
    simulate.add_argument("--json", action="store_true", help="print the raw trace entries as JSON")
    simulate.add_argument("--until", type=float, default=3600.0, help="virtual seconds to run at most")

    crew = sub.add_parser("crew", help="the canonical crew schema; validate and run crew YAML")
    crew_sub = crew.add_subparsers(dest="crew_command", required=True)
    schema = crew_sub.add_parser("schema", help="print the canonical crew JSON Schema")
    schema.add_argument("--markdown", action="store_true", help="print its Markdown reference (docs/crew-schema.md)")
    validate = crew_sub.add_parser("validate", help="validate crew YAML files (exit 0 if all are valid, else 1)")
    validate.add_argument("files", nargs="+", metavar="FILE", help="a crew YAML file, or a multi-file crew directory")
    validate.add_argument("--json", action="store_true", help="print the results as JSON")
    run = crew_sub.add_parser("run", help="run a crew YAML on the embedded store and print what happened")
    run.add_argument("file", metavar="FILE")
    run.add_argument("--store", metavar="PATH", help="SQLite store file (default: a fresh temporary file)")
    run.add_argument("--simulate", action="store_true", help="run on a virtual clock in memory instead")
    run.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the crew to finish")

    bench = sub.add_parser("bench", help="measure throughput against raw baselines (ratios, same run)")
    bench.add_argument("suites", nargs="*", default=["hub"], help="suites to run (default: hub)")
    bench.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    bench.add_argument("--quick", action="store_true", help="fewer messages, fewer repeats (noisier)")

    from orkeon_actors.studio import cli as studio_cli

    studio_cli.configure_parser(sub.add_parser("studio", help=studio_cli.HELP))
    return parser


def _configure_logging(verbose: bool) -> None:
    """The command is an application: it decides where the runtime's logs go. Warnings
    and errors reach stderr; ``-v`` adds the runtime's debug lines."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if verbose else "WARNING")


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    if args.command == "demo":
        from orkeon_actors.cli.demo import run_demo

        return run_demo(color=not args.no_color and sys.stdout.isatty(), store=args.store)
    if args.command == "simulate":
        from orkeon_actors.sim.cli import run_simulate

        return run_simulate(
            args.example,
            seed=args.seed,
            seeds=args.seeds,
            check=args.check,
            faults=args.faults,
            html=args.html,
            trace=args.trace,
            as_json=args.json,
            until=args.until,
        )
    if args.command == "crew":
        from orkeon_actors.cli import crew as crew_cli

        if args.crew_command == "schema":
            return crew_cli.run_schema(markdown=args.markdown)
        if args.crew_command == "validate":
            return crew_cli.run_validate(args.files, as_json=args.json)
        return crew_cli.run_crew(args.file, store=args.store, simulate=args.simulate, timeout=args.timeout)
    if args.command == "bench":
        from orkeon_actors.bench.registry import render_table, run_suites, to_json

        results = run_suites(list(args.suites), quick=args.quick)
        print(to_json(results) if args.json else render_table(results))
        return 0
    if args.command == "studio":
        from orkeon_actors.studio.cli import run_studio

        return run_studio(args)
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    raise SystemExit(main())
