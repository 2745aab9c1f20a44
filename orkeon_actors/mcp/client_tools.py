"""The tools of an external MCP server, as ``Tool`` objects an agent can use.

::

    from orkeon_actors.tools import mcp_tools

    with mcp_tools(["python", "-m", "my_mcp_server"]) as toolset:      # stdio
        agent = Agent("researcher", model, tools=toolset.tools)
    web = mcp_tools("http://127.0.0.1:9000/mcp")                        # streamable HTTP

:class:`McpToolset` connects once (the official ``mcp`` SDK's client: a subprocess over
stdio, or streamable HTTP), lists the server's tools and keeps the session open on one
background thread running an asyncio loop. Each :class:`~orkeon_actors.crew.agent.Tool`
it offers has the server's name, description and ``inputSchema``, and an ``async`` function:
an agent calling it *parks* while ``tools/call`` is in flight (the crew serves its other
agents meanwhile, so a ``Parallel`` crew's MCP calls overlap; ``docs/crews.md``, "The agent
loop"), at most ``timeout`` seconds. :meth:`McpToolset.call` is the same call, blocking its
caller, for use outside a crew:

* a result with ``structuredContent`` is returned as that dict; otherwise as
  ``{"content": [...]}`` (the content blocks as JSON, text blocks as
  ``{"type": "text", "text": ...}``);
* a result with ``isError: true``, a protocol error, a timeout or a lost connection
  raises :class:`~orkeon_actors.errors.McpToolError` naming the tool, which the agent
  loop turns into the ``{"error": {...}}`` result the model reads.

Close the toolset (or leave its ``with`` block) to end the session; a stdio server
process is stopped then.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import attrs
import httpx2
import mcp.types as types
from loguru import logger
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from orkeon_actors.crew.agent import Tool
from orkeon_actors.errors import InvalidArgumentError, McpToolError

__all__ = ["McpServerParams", "McpToolset", "mcp_tools"]


def _command(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class McpServerParams:
    """How to reach an MCP server: ``url`` (streamable HTTP) or ``command`` (stdio: the
    program and its arguments, run with ``env`` added to this process's environment
    and in ``cwd``). Exactly one of the two. ``headers`` are sent with every HTTP
    request (``{"Authorization": "Bearer TOKEN"}`` for ``orkeon mcp --transport http``)."""

    command: tuple[str, ...] | None = attrs.field(default=None, converter=_command)
    url: str | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    headers: Mapping[str, str] | None = None

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise InvalidArgumentError(
                "McpServerParams needs exactly one of command=[program, *args] or url='http://...'"
            )
        if self.command is not None and not self.command:
            raise InvalidArgumentError("McpServerParams.command is empty: give the program to run and its arguments")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"McpServerParams.url must be an http(s) URL, got {self.url!r}")


def _params(server: McpServerParams | str | Sequence[str]) -> McpServerParams:
    if isinstance(server, McpServerParams):
        return server
    if isinstance(server, str):
        return McpServerParams(url=server)
    return McpServerParams(command=server)


class McpToolset:
    """A live session with one MCP server and its tools (see the module docstring).

    Raises :class:`~orkeon_actors.errors.McpToolError` when the server cannot be
    started, reached or initialised within ``timeout`` seconds."""

    def __init__(
        self, server: McpServerParams | str | Sequence[str], *, timeout: float = 60.0, prefix: str = ""
    ) -> None:
        if not timeout > 0:
            raise InvalidArgumentError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.params = _params(server)
        self.timeout = float(timeout)
        self.prefix = prefix
        self._loop = asyncio.new_event_loop()
        self._session: ClientSession | None = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[list[types.Tool]] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, name=f"mcp-client {self._describe()}", daemon=True)
        self._thread.start()
        try:
            listed = self._ready.result(self.timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise McpToolError(
                f"the MCP server {self._describe()} did not initialise within {self.timeout:g}s"
            ) from None
        except McpToolError:
            self.close()
            raise
        self.tools: tuple[Tool, ...] = tuple(self._tool(t) for t in listed)

    # -- the background loop -----------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                params = self.params
                if params.url is not None:
                    client = httpx2.AsyncClient(headers=dict(params.headers or {}), timeout=self.timeout)
                    await stack.enter_async_context(client)
                    transport = streamable_http_client(params.url, http_client=client)
                    read, write = await stack.enter_async_context(transport)
                else:
                    assert params.command is not None
                    program, *arguments = params.command
                    stdio = StdioServerParameters(
                        command=program, args=arguments, env=dict(params.env) if params.env else None, cwd=params.cwd
                    )
                    read, write = await stack.enter_async_context(stdio_client(stdio))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                listed = await session.list_tools()
                self._session = session
                self._ready.set_result(list(listed.tools))
                await self._stop.wait()
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(McpToolError(f"cannot connect to the MCP server {self._describe()}: {exc}"))
            elif not self._stop.is_set():
                logger.warning("the session with the MCP server {} ended: {}", self._describe(), exc)
        finally:
            self._session = None

    # -- calls ---------------------------------------------------------------------------

    def _tool(self, listed: types.Tool) -> Tool:
        name = listed.name

        async def fn(arguments: Mapping[str, Any]) -> dict[str, Any]:
            return await self.acall(name, arguments)

        schema = dict(listed.input_schema) if listed.input_schema else {"type": "object"}
        return Tool(self.prefix + name, listed.description or "", fn, schema)

    def _submit(
        self, name: str, arguments: Mapping[str, Any] | None
    ) -> concurrent.futures.Future[types.CallToolResult]:
        session = self._session
        if session is None:
            raise McpToolError(f"the session with the MCP server {self._describe()} is closed", tool=name)
        return asyncio.run_coroutine_threadsafe(
            session.call_tool(name, dict(arguments or {}), read_timeout_seconds=self.timeout),
            self._loop,
        )

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call the server's tool ``name`` (its own name, without ``prefix``) and
        return its result (see the module docstring); blocks at most ``timeout``."""
        future = self._submit(name, arguments)
        try:
            result = future.result(self.timeout + 1)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpToolError(f"the MCP tool {name!r} did not answer within {self.timeout:g}s", tool=name) from None
        except Exception as exc:  # a protocol error (MCPError), a lost connection
            raise McpToolError(f"the MCP tool {name!r} failed: {exc}", tool=name) from exc
        return self._result(name, result)

    async def acall(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """:meth:`call` for a coroutine on another event loop (the runtime's I/O loop):
        awaits the answer without blocking that loop. Cancelling it cancels the call on
        the session."""
        future = self._submit(name, arguments)
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(future), self.timeout + 1)
        except TimeoutError:
            raise McpToolError(f"the MCP tool {name!r} did not answer within {self.timeout:g}s", tool=name) from None
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:  # a protocol error (MCPError), a lost connection
            raise McpToolError(f"the MCP tool {name!r} failed: {exc}", tool=name) from exc
        return self._result(name, result)

    @staticmethod
    def _result(name: str, result: types.CallToolResult) -> dict[str, Any]:
        if result.is_error:
            text = " ".join(b.text for b in result.content if isinstance(b, types.TextContent)) or "no message"
            raise McpToolError(f"the MCP tool {name!r} reported an error: {text}", tool=name)
        if result.structured_content is not None:
            return dict(result.structured_content)
        return {"content": [block.model_dump(mode="json", exclude_none=True) for block in result.content]}

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """End the session (stopping a stdio server process); idempotent."""
        stop = self._stop
        if stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop already finished: nothing left to stop
                logger.debug("the MCP client loop for {} had already ended", self._describe())
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(self.timeout)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    def __enter__(self) -> McpToolset:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _describe(self) -> str:
        return self.params.url if self.params.url is not None else " ".join(self.params.command or ())

    def __repr__(self) -> str:
        return f"McpToolset({self._describe()}, tools={[t.name for t in getattr(self, 'tools', ())]})"


def mcp_tools(server: McpServerParams | str | Sequence[str], *, timeout: float = 60.0, prefix: str = "") -> McpToolset:
    """Connect to an MCP server and return its tools as a :class:`McpToolset` (an
    iterable of ``Tool``; pass ``toolset.tools`` or the toolset itself as an agent's
    ``tools=``). ``server`` is an ``http(s)://`` URL (streamable HTTP), a command line
    as a list (stdio), or :class:`McpServerParams`. ``prefix`` is put before every
    tool's name (to keep two servers' tools apart). Close it when the crew is done."""
    return McpToolset(server, timeout=timeout, prefix=prefix)
