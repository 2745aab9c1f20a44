"""``orkeon``: demo, simulate, bench, store, host.

orkeon demo [--store PATH]          a short scripted exchange between agents, narrated
orkeon simulate [MODE|all]          run orchestration-mode examples on a seeded, deterministic scheduler
                                    (timeline, --html, --trace, --json, --faults, --seeds A..B --check)
orkeon bench [SUITE ...] [--json]   throughput beside raw baselines, as ratios; targets marked
orkeon bench lifecycle --soak SECS  a supervisor under churn: RSS and its maps over time
orkeon bench lifecycle --posts N    one crew through N posts across sleeps: its bookkeeping sampled
orkeon store PATH VIEW [--json]     look into a store file (read-only), or purge it
orkeon message sent|ls|verify       an agent's sent history, a mailbox's held messages (read-only)
orkeon crew schema|validate|run     the canonical crew schema; validate and run crew YAML
orkeon studio --store PATH          the Studio web view of a store file, read-only
orkeon mcp --store PATH ...         serve the seven agent tools over MCP (docs/mcp.md)
orkeon a2a --store PATH --crew FILE serve crews as A2A agents (docs/a2a.md)
orkeon host --broker URI --host-id ID --store PATH   one host of a fleet on RabbitMQ (docs/distributed.md)
orkeon fleet --broker URI roster|post|spawn|stop|dlq|caps   look at and act on a running fleet
orkeon --version

``-v/--verbose`` is accepted before or after the subcommand. A usage error (an unknown
suite, mode or view included) prints the choices and exits with status 2, like argparse.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Iterator, Sequence

from orkeon_actors.bench.registry import SUITE_NAMES
from orkeon_actors.cli.store_cmd import add_store_parser, run_store

SIMULATED_MODES = ("sequential", "hierarchical", "parallel", "consensual", "graph", "autonomous")
"""The stock example runs of ``orkeon simulate`` (``orkeon_actors.sim.examples.EXAMPLES``),
named here for its help text, so that building the parser does not import the simulator."""


class _SimulateChoices:
    """``orkeon simulate``'s accepted MODEs for argparse: ``all`` and every example
    registered in ``EXAMPLES`` when the command is parsed (a test or a plugin may add
    one), read only then."""

    def _names(self) -> list[str]:
        from orkeon_actors.sim.examples import EXAMPLES

        return ["all", *EXAMPLES]

    def __bool__(self) -> bool:
        return True

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


__all__ = ["main"]


def _version() -> str:
    from orkeon_actors import __version__

    return f"orkeon {__version__} (orkeon_actors, Python {sys.version.split()[0]})"


def _build_parser() -> argparse.ArgumentParser:
    # -v lives on a parent parser shared by every subcommand, so it works after one too;
    # SUPPRESS keeps a subcommand's default from overwriting a -v given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="print the runtime's debug logs"
    )
    parser = argparse.ArgumentParser(prog="orkeon", description="orkeon_actors command line", parents=[common])
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo", parents=[common], help="agents exchanging messages on the durable hub, then a multi-crew simulation"
    )
    demo.add_argument("--no-color", action="store_true", help="plain output")
    demo.add_argument("--store", metavar="PATH", help="keep the demo's store in this file (default: a temporary file)")

    simulate = sub.add_parser("simulate", parents=[common], help="run an orchestration-mode example on a virtual clock")
    simulate.add_argument(
        "example",
        nargs="?",
        default="all",
        choices=_SimulateChoices(),
        metavar="MODE",
        help=f"one of: all (default: the six together), {', '.join(SIMULATED_MODES)}",
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
    simulate.add_argument(
        "--until", type=_virtual_seconds, default=3600.0, help="virtual seconds to run at most (default 3600)"
    )

    from orkeon_actors.cli.mcp import add_parser as add_mcp_parser

    add_mcp_parser(sub)

    crew = sub.add_parser("crew", parents=[common], help="the canonical crew schema; validate and run crew YAML")
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
    run.add_argument("--json", action="store_true", help="stream one JSON object per event, one per line")
    run.add_argument(
        "--studio",
        nargs="?",
        const=0,
        type=int,
        metavar="PORT",
        help="serve the Studio (docs/studio.md) on 127.0.0.1 during the run and after it, until Ctrl-C "
        "(no PORT: any free port)",
    )

    bench = sub.add_parser(
        "bench", parents=[common], help="measure throughput against raw baselines (ratios, same run)"
    )
    bench.add_argument(
        "suites",
        nargs="*",
        default=["hub"],
        choices=SUITE_NAMES,
        metavar="SUITE",
        help=f"suites to run, of: {', '.join(SUITE_NAMES)} (default: hub)",
    )
    bench.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    bench.add_argument("--quick", action="store_true", help="fewer messages, fewer repeats (noisier)")
    bench.add_argument("--check", action="store_true", help="exit with status 1 when a figure misses its target")
    bench.add_argument("--dir", metavar="DIR", help="where temporary stores go (default: the system temp directory)")
    bench.add_argument(
        "--soak",
        type=float,
        metavar="SECONDS",
        help="with the lifecycle suite: run a supervisor under churn for SECONDS, reporting RSS and its maps",
    )
    bench.add_argument(
        "--posts",
        type=int,
        nargs="?",
        const=1_000_000,
        metavar="N",
        help="with the lifecycle suite: one crew processes N posts (default 1,000,000) across sleeps, "
        "its bookkeeping rows and pages sampled",
    )
    bench.add_argument(
        "--boot-crews",
        type=int,
        metavar="N",
        help="sleeping crews in the lifecycle boot store (default 1,000,000; 2,000 with --quick)",
    )

    add_store_parser(sub, common)
    from orkeon_actors.cli.message_cmd import add_message_parser

    add_message_parser(sub, common)

    from orkeon_actors.studio import cli as studio_cli

    studio_cli.configure_parser(sub.add_parser("studio", parents=[common], help=studio_cli.HELP))

    from orkeon_actors.cli.host_cmd import add_parser as add_host_parser

    add_host_parser(sub, common)

    from orkeon_actors.cli.fleet_cmd import add_parser as add_fleet_parser

    add_fleet_parser(sub, common)

    from orkeon_actors.cli.a2a_cmd import add_parser as add_a2a_parser

    add_a2a_parser(sub)
    return parser


def _configure_logging(verbose: bool) -> None:
    """The command is an application: it decides where the runtime's logs go. Warnings
    and errors reach stderr; ``-v`` adds the runtime's debug lines."""
    from loguru import logger

    from orkeon_actors.logs import enable_logging

    logger.remove()
    # Resolve sys.stderr at each write: the stream may be replaced (a test's capture) after main returns.
    enable_logging("DEBUG" if verbose else "WARNING", lambda line: sys.stderr.write(line))


def _virtual_seconds(text: str) -> float:
    """``--until``: a finite number of virtual seconds, 0 or more."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of virtual seconds (e.g. 3600)") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number of virtual seconds: give 0 or more (e.g. 3600)")
    return seconds


SIGPIPE_EXIT = 128 + 13
"""The status of a command whose reader went away (``orkeon simulate | head``): what a
Unix tool killed by ``SIGPIPE`` reports to its shell."""


def _quiet_broken_pipe() -> int:
    """The reader of stdout is gone: point stdout at /dev/null (so the interpreter's
    final flush cannot fail again) and exit quietly, as Unix tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_EXIT


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    _configure_logging(getattr(args, "verbose", False))
    from orkeon_actors.errors import EventHubError

    try:
        code = _run(args, parser)
        if not sys.stdout.closed:  # `orkeon mcp` over stdio hands its stdout to the SDK, which closes it
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except EventHubError as exc:  # a typed error already says what to do: no traceback
        print(f"orkeon {args.command}: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
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
        return crew_cli.run_crew(
            args.file,
            store=args.store,
            simulate=args.simulate,
            timeout=args.timeout,
            studio=args.studio,
            as_json=args.json,
        )
    if args.command == "mcp":
        from orkeon_actors.cli.mcp import run_mcp

        return run_mcp(args)
    if args.command == "a2a":
        from orkeon_actors.cli.a2a_cmd import run_a2a

        return run_a2a(args)
    if args.command == "bench" and args.soak is not None:
        if list(args.suites) != ["lifecycle"] or not args.soak > 0 or args.posts is not None:
            parser.error(
                "--soak SECONDS (a positive number) goes with the lifecycle suite: orkeon bench lifecycle --soak 60"
            )
        from orkeon_actors.cli.soak_cmd import run_soak_command

        return run_soak_command(args.soak, as_json=args.json, directory=args.dir)
    if args.command == "bench" and args.posts is not None:
        if list(args.suites) != ["lifecycle"] or args.soak is not None or args.posts < 1:
            parser.error("--posts N (at least 1) goes with the lifecycle suite: orkeon bench lifecycle --posts 1000000")
        from orkeon_actors.cli.posts_cmd import run_posts_command

        return run_posts_command(args.posts, as_json=args.json, directory=args.dir)
    if args.command == "bench":
        from orkeon_actors.cli.bench_cmd import run_bench

        return run_bench(
            list(args.suites),
            quick=args.quick,
            as_json=args.json,
            check=args.check,
            directory=args.dir,
            boot_crews=args.boot_crews,
            verbose=getattr(args, "verbose", False),
        )
    if args.command == "store":
        return run_store(args, parser)
    if args.command == "message":
        from orkeon_actors.cli.message_cmd import run_message

        return run_message(args, parser)
    if args.command == "host":
        from orkeon_actors.cli.host_cmd import run_host

        return run_host(args)
    if args.command == "fleet":
        from orkeon_actors.cli.fleet_cmd import run_fleet

        return run_fleet(args, parser)
    if args.command == "studio":
        from orkeon_actors.studio.cli import run_studio

        return run_studio(args)
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    raise SystemExit(main())
