"""``orkeon``: demo, bench.

orkeon demo                   a short scripted exchange between agents, narrated
orkeon bench hub [--json]     hub throughput beside raw pykka, as ratios
orkeon simulate [example]     run one orchestration-mode example (or all) and print its timeline
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
        help="sequential, hierarchical, parallel, consensual, graph, autonomous, or all (default)",
    )
    simulate.add_argument("--seed", type=int, default=0, help="simulation seed")

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

        return run_simulate(args.example, seed=args.seed)
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
