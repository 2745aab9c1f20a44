"""``orkeon studio --store PATH``: watch a store file another process runs, read-only."""

from __future__ import annotations

import argparse
import sys
import threading

from orkeon_actors.errors import ExtraNotInstalledError, InvalidArgumentError

__all__ = ["HELP", "configure_parser", "run_studio"]

HELP = "serve the Studio web view of a store file (read-only; see docs/studio.md)"


def configure_parser(studio: argparse.ArgumentParser) -> None:
    """Add the ``studio`` subcommand's options to its parser."""
    studio.description = (
        "Serve the Studio on 127.0.0.1 for a store file, read-only: crews, waits, mailboxes, "
        "outbox, refreshed every second. For the live message flow, start the runtime with "
        "Runtime.start(studio=PORT) instead."
    )
    studio.add_argument("--store", metavar="PATH", required=True, help="the SQLite store file to watch")
    studio.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    studio.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    studio.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host (the page has no other protection than its access token)",
    )


def run_studio(args: argparse.Namespace) -> int:
    """Serve until interrupted (Ctrl-C). Prints the URL to open, token included."""
    from orkeon_actors.studio.server import StudioServer  # here: the CLI's parser stays light
    from orkeon_actors.studio.sources import StoreFileSource

    try:
        source = StoreFileSource(args.store)
        server = StudioServer(source, host=args.host, port=args.port, allow_remote=args.allow_remote)
    except (InvalidArgumentError, ExtraNotInstalledError) as exc:
        print(f"orkeon studio: {exc}", file=sys.stderr)
        return 2
    print(f"Studio for {args.store} (read-only): {server.url}", flush=True)
    print("Ctrl-C stops it.", flush=True)
    stopped = threading.Event()
    try:
        stopped.wait()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.stop()
    return 0
