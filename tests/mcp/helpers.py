"""Driving ``orkeon mcp`` with the official SDK client: over stdio (a real subprocess)
and over streamable HTTP on loopback (a real server process, with its bearer token).

Every protocol revision the server serves can be spoken: the ``initialize`` handshake
revisions through a ``ClientSession`` that offers that revision, the 2026-07-28
revision through ``Client(..., mode="2026-07-28")`` (the per-request envelope)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any

import attrs
import httpx2
import mcp.types as types
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

ORKEON = [sys.executable, "-m", "orkeon_actors.cli"]
REVISIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
"""Every protocol revision the SDK speaks, oldest first; the server serves them all."""


def drain(stream: IO[str]) -> None:
    """Keep reading a child's pipe in a daemon thread so the child never blocks on it."""
    threading.Thread(target=stream.read, daemon=True).start()


def result_of(result: types.CallToolResult) -> dict[str, Any]:
    """The tool's dict, checking that the text content carries the same JSON."""
    assert result.structured_content is not None
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structured_content
    return dict(result.structured_content)


def served_definitions(listed: types.ListToolsResult) -> list[dict[str, Any]]:
    """The listed tools as wire dicts (name, description, inputSchema, outputSchema)."""
    fields = {"name", "description", "input_schema", "output_schema"}
    return [tool.model_dump(by_alias=True, include=fields) for tool in listed.tools]


@attrs.frozen
class Served:
    """A running ``orkeon mcp --transport http``: its URL and bearer token."""

    url: str
    token: str
    process: subprocess.Popen[str] | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def transport(self) -> Any:
        """The SDK's streamable HTTP transport, token included."""
        return streamable_http_client(self.url, http_client=httpx2.AsyncClient(headers=self.headers, timeout=120))


@contextlib.asynccontextmanager
async def speaking(transport: Any, revision: str = LATEST_HANDSHAKE_VERSION) -> AsyncIterator[Any]:
    """A session over ``transport`` (an SDK transport context manager) speaking ``revision``."""
    if revision in MODERN_PROTOCOL_VERSIONS:
        async with Client(transport, mode=revision, cache=None) as client:
            yield client
        return
    async with transport as (read, write), ClientSession(read, write) as session:
        offer = types.InitializeRequestParams(
            protocol_version=revision,
            capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="orkeon-tests", version="1"),
        )
        result = await session.send_request(types.InitializeRequest(params=offer), types.InitializeResult)
        assert result.protocol_version == revision, f"asked for {revision}, the server chose {result.protocol_version}"
        session.adopt(result)
        await session.send_notification(types.InitializedNotification())
        yield session


def stdio_params(store: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=ORKEON[0], args=[*ORKEON[1:], "mcp", "--store", str(store), *args])


@contextlib.asynccontextmanager
async def stdio_session(
    store: Path, *args: str, revision: str = LATEST_HANDSHAKE_VERSION
) -> AsyncIterator[ClientSession]:
    """An initialised session with ``orkeon mcp --store store *args`` over stdio."""
    async with speaking(stdio_client(stdio_params(store, *args)), revision) as session:
        yield session


@contextlib.asynccontextmanager
async def served_session(
    transport: str, store: Path, *args: str, revision: str = LATEST_HANDSHAKE_VERSION
) -> AsyncIterator[Any]:
    """An initialised session with a fresh ``orkeon mcp`` over ``transport``
    (``stdio``: the client launches it; ``http``: a server process on loopback)."""
    if transport == "stdio":
        async with stdio_session(store, *args, revision=revision) as session:
            yield session
        return
    with http_server(store, *args) as served:
        async with speaking(served.transport(), revision) as session:
            yield session


@contextlib.asynccontextmanager
async def http_session(served: Served, revision: str = LATEST_HANDSHAKE_VERSION) -> AsyncIterator[Any]:
    async with speaking(served.transport(), revision) as session:
        yield session


@contextlib.contextmanager
def http_server(store: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """Run ``orkeon mcp --transport http --port 0`` and yield its URL and token (read
    from the lines it prints once listening); SIGTERM and wait at the end."""
    process = subprocess.Popen(
        [*ORKEON, "mcp", "--store", str(store), "--transport", "http", "--port", "0", *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    try:
        assert process.stderr is not None
        url = token = None
        for line in process.stderr:
            if found := re.search(r"serving on (http://\S+)", line):
                url = found.group(1)
            if found := re.search(r"bearer token (\S+)", line):
                token = found.group(1)
                break
        assert url is not None and token is not None, f"orkeon mcp exited without serving (code {process.wait(10)})"
        drain(process.stderr)
        yield Served(url, token, process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
