"""``orkeon a2a``: serve crews as A2A agents on a store (docs/a2a.md).

The process owns the runtime (and the store file: one writer per file). Each ``--crew``
(a crew YAML file or a multi-file crew directory, with an ``a2a:`` block) is exposed;
its tasks are crew runs kept in the store, so a restart on the same store serves the
tasks of the previous run (``tasks/get``) and wakes the crews waiting on their callers.

Callers: ``--caller NAME`` (repeatable; default ``a2a``) is the peer ``client://NAME``
whose bearer token is printed at start (for one caller, ``ORKEON_A2A_TOKEN`` gives it).
The crews' ``links:`` decide which caller may call which crew. ``--host`` is
127.0.0.1 unless ``--allow-remote`` (and ``--allow-host`` for a wildcard address).
Runs until interrupted (Ctrl-C or SIGTERM), then puts its crews to sleep.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

__all__ = ["TOKEN_ENV", "add_parser", "run_a2a"]

TOKEN_ENV = "ORKEON_A2A_TOKEN"
"""The environment variable giving the bearer token of the one caller."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    a2a = sub.add_parser("a2a", help="serve crews as A2A (Agent2Agent) agents (docs/a2a.md)")
    a2a.add_argument("--store", metavar="PATH", required=True, help="SQLite store file (created if missing)")
    a2a.add_argument(
        "--crew",
        metavar="FILE",
        action="append",
        required=True,
        help="a crew YAML file or multi-file crew directory with an a2a: block (repeatable)",
    )
    a2a.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    a2a.add_argument("--port", type=int, default=8770, help="port (default 8770; 0 picks a free one)")
    a2a.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host (tokens are the guard)")
    a2a.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="a further name clients put in the Host header (repeatable; required for a wildcard --host)",
    )
    a2a.add_argument(
        "--caller",
        metavar="NAME",
        action="append",
        default=[],
        help="a caller, the peer client://NAME, with its own token (repeatable; default: a2a)",
    )
    a2a.add_argument("--restrictive", action="store_true", help="ACL: refuse crew traffic no link declares")


def run_a2a(args: argparse.Namespace) -> int:
    import secrets

    import orkeon_actors as ok
    from orkeon_actors.a2a import EXTRA_MODULES
    from orkeon_actors.acl import AclMiddleware, AclRegistry, RestrictiveCrewLinkPolicy
    from orkeon_actors.config.declarations import EventDeclarations

    try:
        from orkeon_actors.a2a.server import A2AConfig, A2AServer
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in EXTRA_MODULES:
            raise
        raise SystemExit(
            f'orkeon a2a needs the "a2a" extra (the A2A SDK; {exc.name} is missing): pip install "orkeon-actors[a2a]"'
        ) from None
    try:
        blueprints = [ok.load_crew(path) for path in args.crew]
    except ok.errors.CrewConfigError as exc:
        raise SystemExit(f"orkeon a2a: {exc}") from None
    names = list(dict.fromkeys(args.caller)) or ["a2a"]
    given = os.environ.get(TOKEN_ENV)
    if given and len(names) > 1:
        raise SystemExit(f"orkeon a2a: {TOKEN_ENV} gives one caller's token; with several --caller each gets its own")
    callers = {name: given or secrets.token_urlsafe(32) for name in names}
    registry = AclRegistry()
    policy = RestrictiveCrewLinkPolicy(registry) if args.restrictive else registry
    config = A2AConfig(
        port=args.port,
        host=args.host,
        callers=callers,
        allow_remote=args.allow_remote,
        allowed_hosts=tuple(args.allow_host),
    )
    stop = threading.Event()

    def interrupted(signum: int, frame: FrameType | None) -> None:
        stop.set()

    rt = ok.Runtime.start(store=args.store, middleware=[AclMiddleware(policy), EventDeclarations()])
    try:
        try:
            server = A2AServer(rt, config, acl=registry)
        except ok.errors.InvalidArgumentError as exc:
            raise SystemExit(f"orkeon a2a: {exc}") from None
        try:
            for blueprint in blueprints:
                try:
                    url = server.expose(blueprint)
                except ok.errors.EventHubError as exc:
                    raise SystemExit(f"orkeon a2a: {exc}") from None
                print(
                    f"orkeon a2a: crew {blueprint.name} at {url} (card: {url}.well-known/agent-card.json)",
                    file=sys.stderr,
                )
            for name, token in callers.items():
                print(f"orkeon a2a: caller {name} (client://{name}) bearer token {token}", file=sys.stderr, flush=True)
            signal.signal(signal.SIGTERM, interrupted)
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
        finally:
            server.stop()
    finally:
        rt.stop()
    return 0
