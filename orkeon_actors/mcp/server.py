"""The seven agent tools served over MCP, with the official ``mcp`` SDK (2.x, low-level server).

:class:`HubToolServer` exposes one :class:`~orkeon_actors.tools.EventHubTools` (one
identity, fixed when it was built: an MCP client cannot choose or forge its source crew
or agent, spec §6.1) as an MCP server:

* ``tools/list`` answers ``tool_definitions(style="mcp")`` exactly (name, description,
  ``inputSchema``, ``outputSchema``).
* ``tools/call`` runs ``EventHubTools.invoke``: the arguments are validated by the same
  DTOs as everywhere, so a refusal is the typed ``ToolValidationError`` naming the field.
  A success is a result whose ``structuredContent`` is the tool's response (and its JSON
  as text); *every* failure, a typed hub error, cancellation by a budget or a stopped
  runtime included, is a result with ``isError: true`` carrying
  ``{"error": {"type", "message", "field"}}``, never a JSON-RPC protocol error.
* Long waits (``wait_for_event``, ``receive_message``, ``send_request``) are ordinary
  long-running calls. Each call runs the blocking tool on a worker thread with its own
  :class:`~orkeon_actors.model.cancel.CancelToken`; when the client cancels the request
  (``notifications/cancelled``) or goes away, the token fires, the hub withdraws the
  wait (a message it did not take stays for the next call) and the thread is freed. At
  most ``max_concurrent_calls`` calls run at once; further calls queue. A
  ``receive_message`` that takes a message holds it under a lease, confirmed only once
  the response was written to the transport and given back otherwise
  (:mod:`orkeon_actors.mcp.delivery`), so a caller that goes away loses nothing. A call whose
  request carries a ``progressToken`` gets a progress notification every
  ``progress_interval`` seconds while it runs (``None`` sends none).

Protocol revisions: the SDK's dual-era loop serves the ``initialize`` handshake
revisions (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25) and the 2026-07-28 revision's
per-request envelope, on both transports; the client's first request decides.

Transports: :meth:`HubToolServer.run_stdio` (what desktop clients launch; see
:mod:`orkeon_actors.mcp.stdio_guard` for malformed lines) and
:meth:`HubToolServer.run_http` (streamable HTTP at ``/mcp``, behind
:class:`~orkeon_actors.http_guard.HttpGuard`: a bearer token, ``Host`` and
``Origin`` checked against the bound address, bounded bodies). ``orkeon mcp``
(:mod:`orkeon_actors.cli.mcp`) wires them to a runtime.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, TextIO, cast

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.message import SessionMessage
from starlette.requests import Request

from orkeon_actors.errors import CancelledError, EventHubError, LimitExceededError
from orkeon_actors.http_guard import HttpGuard, HttpPolicy
from orkeon_actors.hub.port import MailboxLease
from orkeon_actors.mcp.delivery import (
    SCOPE_KEY,
    ConfirmingStdout,
    Deliveries,
    LeaseHandoff,
    claimed_stdout,
    settle,
    watch_responses,
)
from orkeon_actors.mcp.stdio_guard import answer_malformed
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.tools.definitions import tool_definitions
from orkeon_actors.tools.event_hub_tools import EventHubTools, tool_error_result

__all__ = [
    "DEFAULT_MAX_CALLS_PER_SESSION",
    "DEFAULT_MAX_CONCURRENT_CALLS",
    "DEFAULT_MAX_REQUEST_BODY",
    "DEFAULT_PROGRESS_INTERVAL",
    "HubToolServer",
    "is_error_result",
]

DEFAULT_MAX_CONCURRENT_CALLS: Final = 64
DEFAULT_MAX_CALLS_PER_SESSION: Final = 16
DEFAULT_PROGRESS_INTERVAL: Final = 10.0
DEFAULT_MAX_REQUEST_BODY: Final = 1024 * 1024
"""Largest HTTP request body accepted (bytes); a larger one gets ``413`` before it is read whole."""
MCP_PATH: Final = "/mcp"
DISCONNECT_POLL: Final = 0.1
"""Seconds between two checks that an HTTP caller is still connected."""


def is_error_result(result: dict[str, Any]) -> bool:
    """Whether a tool result is the ``{"error": {...}}`` of a refused call."""
    return set(result) == {"error"}


class HubToolServer:
    """An MCP server for ``tools`` (see the module docstring). ``name`` is the server
    name clients show; ``version`` its version."""

    def __init__(
        self,
        tools: EventHubTools,
        *,
        name: str = "orkeon",
        version: str | None = None,
        max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT_CALLS,
        max_calls_per_session: int = DEFAULT_MAX_CALLS_PER_SESSION,
        progress_interval: float | None = DEFAULT_PROGRESS_INTERVAL,
    ) -> None:
        for label, value in (
            ("max_concurrent_calls", max_concurrent_calls),
            ("max_calls_per_session", max_calls_per_session),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{label} must be an int, got {value!r}")
            if value < 1:
                raise ValueError(f"{label} must be at least 1, got {value}")
        if progress_interval is not None and not progress_interval > 0:
            raise ValueError(f"progress_interval must be positive seconds or None, got {progress_interval!r}")
        self.tools = tools
        self.progress_interval = progress_interval
        self.max_concurrent_calls = max_concurrent_calls
        self.max_calls_per_session = max_calls_per_session
        self.running: dict[str, int] = {}
        """Calls running (or queued for a slot) per session key (see :func:`session_key`)."""
        self._limiter: anyio.CapacityLimiter | None = None
        self._stdio_deliveries: Deliveries | None = None
        self.server: Server[Any] = Server(
            name, version=version or "", on_list_tools=self._list_tools, on_call_tool=self._call_tool
        )

    # -- handlers ------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool.model_validate(definition) for definition in tool_definitions("mcp")]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name, arguments = params.name, params.arguments
        request = ctx.request if isinstance(ctx.request, Request) else None
        session = session_key(request)
        if self.running.get(session, 0) >= self.max_calls_per_session:
            busy = LimitExceededError(
                f"this MCP session already runs {self.max_calls_per_session} calls (the per-session bound): "
                "wait for one to finish, or cancel a wait it no longer needs",
                bound="max_calls_per_session",
                limit=self.max_calls_per_session,
            )
            return _as_call_result(tool_error_result(name, busy))
        self.running[session] = self.running.get(session, 0) + 1
        try:
            result, lease = await self._run_call(ctx, request, name, arguments)
            if lease is not None:
                self._deliver(ctx, request, lease)
            return _as_call_result(result)
        finally:
            self.running[session] -= 1
            if not self.running[session]:
                del self.running[session]

    async def _run_call(
        self, ctx: ServerRequestContext[Any], request: Request | None, name: str, arguments: dict[str, Any] | None
    ) -> tuple[dict[str, Any], MailboxLease | None]:
        outcome: tuple[dict[str, Any], MailboxLease | None] | None = None
        async with anyio.create_task_group() as group:
            if self.progress_interval is not None:  # sends nothing for a request without a progressToken
                group.start_soon(self._heartbeat, ctx, name)
            if request is not None:
                group.start_soon(_cancel_when_gone, request, group.cancel_scope)
            outcome = await self.call_leased(name, arguments)
            group.cancel_scope.cancel()
        if outcome is None:  # the HTTP caller went away: its wait was withdrawn, nobody reads this
            gone = CancelledError(f"the MCP client went away during the {name} call")
            return tool_error_result(name, gone), None
        return outcome

    def _deliver(self, ctx: ServerRequestContext[Any], request: Request | None, lease: MailboxLease) -> None:
        """Hand ``lease`` to the transport that writes this call's response: it is
        confirmed once the response was written, given back otherwise
        (:mod:`orkeon_actors.mcp.delivery`). In process, with no transport: confirmed."""
        deliveries = request.scope.get(SCOPE_KEY) if request is not None else self._stdio_deliveries
        if deliveries is None or ctx.request_id is None:
            settle(lease, delivered=True)
        else:
            deliveries.expect(ctx.request_id, lease)

    async def _heartbeat(self, ctx: ServerRequestContext[Any], name: str) -> None:
        """Every ``progress_interval`` seconds of a running call, a progress notification
        (clients that reset their request timeout on progress keep long waits alive)."""
        assert self.progress_interval is not None
        beats = 0
        while True:
            await anyio.sleep(self.progress_interval)
            beats += 1
            await ctx.session.report_progress(float(beats), message=f"{name} still waiting")

    async def call(self, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """Run one tool call on a worker thread and return its result dict (an error
        result for any typed failure), a message it took counted as consumed at once.
        Cancelling the calling task fires the call's token, so the hub withdraws its
        wait, and re-raises the cancellation."""
        result, lease = await self.call_leased(name, arguments)
        if lease is not None:
            settle(lease, delivered=True)
        return result

    async def call_leased(
        self, name: str, arguments: dict[str, Any] | None
    ) -> tuple[dict[str, Any], MailboxLease | None]:
        """:meth:`call`, with the lease of the mailbox message a ``receive_message``
        result carries (``EventHubTools.invoke_leased``): the caller confirms it once
        the result was delivered, or gives it back. Cancelled, the call gives back a
        message the hub handed it at that instant, and re-raises the cancellation."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrent_calls)
        token = CancelToken()
        handoff = LeaseHandoff()

        def invoke() -> dict[str, Any]:
            try:
                result, lease = self.tools.invoke_leased(name, arguments, cancel=token)
            except EventHubError as exc:  # cancelled, out of budget, runtime stopped: still a result
                return tool_error_result(name, exc)
            if lease is not None:
                handoff.offer(lease)
            return result

        try:
            result = await anyio.to_thread.run_sync(invoke, abandon_on_cancel=True, limiter=self._limiter)
        except anyio.get_cancelled_exc_class():
            token.cancel(CancelledError(f"the MCP client cancelled the {name} call"))
            handoff.abandon()
            raise
        return result, handoff.take()

    # -- transports ----------------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve one client on this process's stdin/stdout until it disconnects. A
        mailbox message a call hands out is confirmed once the line carrying its
        response was flushed to stdout (:mod:`orkeon_actors.mcp.delivery`)."""
        deliveries = Deliveries()

        def observe(item: SessionMessage) -> None:
            message = item.message
            if isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                request_id = (message.params or {}).get("requestId")
                if isinstance(request_id, (str, int)):
                    deliveries.cancelled(request_id)

        self._stdio_deliveries = deliveries
        try:
            async with claimed_stdout() as out:
                stdout = cast(
                    "anyio.AsyncFile[str]", ConfirmingStdout(out, deliveries)
                )  # the SDK writes and flushes it
                async with stdio_server(stdout=stdout) as streams:
                    read_stream, write_stream = streams
                    async with answer_malformed(read_stream, write_stream, observe) as checked:
                        await self.server.run(checked, write_stream, self.server.create_initialization_options())
        finally:
            self._stdio_deliveries = None
            deliveries.give_back_all()

    async def run_http(
        self,
        policy: HttpPolicy,
        port: int = 8765,
        *,
        on_listening: Callable[[str, str], None] | None = None,
        max_request_body: int = DEFAULT_MAX_REQUEST_BODY,
    ) -> None:
        """Serve streamable HTTP at ``http://policy.host:port/mcp`` until cancelled.

        ``port=0`` picks a free port; ``on_listening(url, token)`` is called with the
        bound URL and the bearer token once the server accepts connections (default:
        print both to stderr)."""
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        # Host, Origin and the token are checked by the guard, against the bound port.
        manager = StreamableHTTPSessionManager(app=self.server, max_request_body_size=max_request_body)
        guard = HttpGuard(watch_responses(manager.handle_request), policy)

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            async with manager.run():
                yield

        app = Starlette(routes=[Route(MCP_PATH, endpoint=guard)], lifespan=lifespan)
        config = uvicorn.Config(app, host=policy.host, port=port, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        announce = on_listening or _print_to(sys.stderr)
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve)
            while not server.started:
                if server.should_exit:
                    return
                await anyio.sleep(0.01)
            bound = int(server.servers[0].sockets[0].getsockname()[1])
            guard.listening(bound)
            announce(f"http://{policy.url_host}:{bound}{MCP_PATH}", policy.token)


def session_key(request: Request | None) -> str:
    """Which session a call belongs to, for the per-session bound: a stateful HTTP
    session by its ``Mcp-Session-Id``; a request without one (the 2026-07-28 revision,
    stateless) by its TCP connection; stdio (``request`` None) is the one client."""
    if request is None:
        return "stdio"
    session_id = request.headers.get("mcp-session-id")
    if session_id:
        return f"session {session_id}"
    peer = request.client
    return f"connection {peer.host}:{peer.port}" if peer is not None else "connection ?"


def _as_call_result(result: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result))],
        structured_content=result,
        is_error=is_error_result(result),
    )


async def _cancel_when_gone(request: Request, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once the HTTP connection that carried ``request`` is closed.

    A streamable HTTP session outlives its requests, so the SDK keeps running a call
    whose caller dropped its connection: a ``receive_message`` left waiting would take
    the next message and answer nobody. Polled: Starlette tells a disconnect only when
    asked."""
    while not await request.is_disconnected():
        await anyio.sleep(DISCONNECT_POLL)
    scope.cancel()


def _print_to(stream: TextIO) -> Callable[[str, str], None]:
    def announce(url: str, token: str) -> None:
        print(f"orkeon mcp: serving on {url}", file=stream, flush=True)
        print(f"orkeon mcp: bearer token {token}", file=stream, flush=True)

    return announce
