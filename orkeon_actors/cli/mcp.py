"""``orkeon mcp``: serve the seven agent tools of one identity over MCP, on a store.

The process owns the runtime (and the store file: one writer per file, so other
processes reach this hub through this server, e.g. several MCP sessions over HTTP).
The identity is fixed here, at launch:

* ``--crew CREW --agent AGENT``: the tools of ``agent://CREW/AGENT`` (its mailbox is
  registered, durably on the store, so posts to it are kept while nobody reads).
* ``--client NAME``: the external peer ``client://NAME`` of spec §10.2.1: it sends as
  the crew id the ACL registry gives ``client:NAME`` (``--crew`` when given) and reads
  its own ``client://NAME`` mailbox. Subject to the ACL like every sender.

``--links FILE`` (repeatable) registers crew YAMLs with the ACL (each crew's id is its
``name:``); ``--restrictive`` refuses undeclared traffic. With ``--client`` or
``--links`` the ACL stage runs; without, no ACL is installed (as ``Runtime.start()``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = ["TOKEN_ENV", "add_parser", "run_mcp"]

TOKEN_ENV = "ORKEON_MCP_TOKEN"
"""The environment variable through which the operator gives the HTTP bearer token."""
_MCP_EXTRA_MODULES = frozenset({"mcp", "mcp_types", "anyio", "starlette", "uvicorn", "pydantic", "httpx2"})


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser("mcp", help="serve the seven agent tools over MCP (stdio or streamable HTTP)")
    mcp.add_argument("--store", metavar="PATH", required=True, help="SQLite store file (created if missing)")
    mcp.add_argument("--crew", metavar="CREW", help="crew id of the identity served")
    mcp.add_argument("--agent", metavar="AGENT", help="agent id of the identity served (with --crew)")
    mcp.add_argument("--client", metavar="NAME", help="serve as the external peer client://NAME (§10.2.1)")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    mcp.add_argument(
        "--allow-remote",
        action="store_true",
        help="HTTP: allow a non-loopback --host (the token is the only guard then)",
    )
    mcp.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="HTTP: a further name clients put in the Host header (repeatable; required for a wildcard --host)",
    )
    mcp.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765; 0 picks a free one)")
    mcp.add_argument(
        "--links", metavar="FILE", action="append", default=[], type=Path, help="crew YAML for the ACL (repeatable)"
    )
    mcp.add_argument("--restrictive", action="store_true", help="ACL: refuse traffic no link declares")
    mcp.add_argument("--max-concurrent-calls", type=int, default=64, help="tool calls running at once (default 64)")
    mcp.add_argument(
        "--max-calls-per-session",
        type=int,
        default=16,
        help="tool calls one session may run at once (default 16); more are refused",
    )
    mcp.add_argument(
        "--progress-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="progress notification period of a running call that asked for progress (default 10; 0: none)",
    )


def run_mcp(args: argparse.Namespace) -> int:
    import orkeon_actors as ok
    from orkeon_actors.acl import AclMiddleware, AclRegistry, RestrictiveCrewLinkPolicy
    from orkeon_actors.acl.grammar import load_crew_file

    if args.client is None and (args.crew is None or args.agent is None):
        raise SystemExit("orkeon mcp: give --crew CREW --agent AGENT, or --client NAME")
    try:
        import anyio

        from orkeon_actors.http_guard import HttpPolicy
        from orkeon_actors.mcp.server import HubToolServer
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in _MCP_EXTRA_MODULES:
            raise
        raise SystemExit(
            f'orkeon mcp needs the "mcp" extra (the MCP SDK; {exc.name} is missing): pip install "orkeon-actors[mcp]"'
        ) from None
    policy = None
    if args.transport == "http":
        given: dict[str, Any] = {"token": token} if (token := os.environ.get(TOKEN_ENV)) else {}
        try:
            policy = HttpPolicy(args.host, allow_remote=args.allow_remote, allowed_hosts=args.allow_host, **given)
        except ok.errors.InvalidArgumentError as exc:
            raise SystemExit(f"orkeon mcp: {exc}") from None
    registry: AclRegistry | None = None
    middleware: list[ok.EventHubMiddleware] = []
    crew_id = args.crew
    if args.client is not None or args.links:
        registry = AclRegistry()
        for path in args.links:
            spec = load_crew_file(path)
            registry.register_spec(spec, spec.name)
        if args.client is not None:
            crew_id = registry.register_client(args.client, args.crew)
        elif registry.snapshot.names.get(ok.CrewId(crew_id)) is None:
            registry.register_crew(crew_id, crew_id)  # undeclared: the policy's default rule
        middleware.append(AclMiddleware(RestrictiveCrewLinkPolicy(registry) if args.restrictive else registry))
    rt = ok.Runtime.start(store=args.store, middleware=middleware)
    try:
        client = rt.hub.bind(crew_id, args.agent)
        own = ok.MailboxAddress.client(args.client) if args.client is not None else None
        tools = ok.tools.EventHubTools(client, own_mailbox=own)
        server = HubToolServer(
            tools,
            version=ok.__version__,
            max_concurrent_calls=args.max_concurrent_calls,
            max_calls_per_session=args.max_calls_per_session,
            progress_interval=args.progress_interval or None,
        )
        try:
            if args.transport == "stdio":
                anyio.run(server.run_stdio)
            else:
                assert policy is not None
                anyio.run(lambda: server.run_http(policy, args.port))
        finally:
            # Not tools.close(): that would unregister the mailbox and delete what it
            # still holds (a message given back by a call whose client left, posts nobody
            # read). It stays registered in the store for the next server; rt.stop()
            # closes it live only.
            tools.topic_cursors.close()
    finally:
        rt.stop()
    return 0
