"""``orkeon``: demo, bench.

orkeon demo                   a short scripted exchange between agents, narrated
orkeon bench hub [--json]     hub throughput beside raw pykka, as ratios
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orkeon", description="orkeon_actors command line")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run a short scripted exchange between agents and narrate it")
    demo.add_argument("--no-color", action="store_true", help="plain output")

    bench = sub.add_parser("bench", help="measure throughput against raw baselines (ratios, same run)")
    bench.add_argument("suites", nargs="*", default=["hub"], help="suites to run (default: hub)")
    bench.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    bench.add_argument("--quick", action="store_true", help="fewer messages, fewer repeats (noisier)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "demo":
        from orkeon_actors.cli.demo import run_demo

        return run_demo(color=not args.no_color and sys.stdout.isatty())
    if args.command == "bench":
        from orkeon_actors.bench.registry import render_table, run_suites, to_json

        results = run_suites(list(args.suites), quick=args.quick)
        print(to_json(results) if args.json else render_table(results))
        return 0
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    raise SystemExit(main())
