"""Driving ``orkeon mcp`` with the official SDK client: over stdio (a real subprocess)
and over streamable HTTP on loopback (a real server process)."""

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

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

ORKEON = [sys.executable, "-m", "orkeon_actors.cli"]


def drain(stream: IO[str]) -> None:
    """Keep reading a child's pipe in a daemon thread so the child never blocks on it."""
    threading.Thread(target=stream.read, daemon=True).start()


def result_of(result: types.CallToolResult) -> dict[str, Any]:
    """The tool's dict, checking that the text content carries the same JSON."""
    assert result.structuredContent is not None
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structuredContent
    return dict(result.structuredContent)


class RequestIds:
    """Records the JSON-RPC id of every tools/call the client sends (to cancel one)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int | str, str]] = []


@contextlib.asynccontextmanager
async def _recording(write: Any, ids: RequestIds) -> AsyncIterator[Any]:
    send, receive = anyio.create_memory_object_stream[SessionMessage](16)

    async def forward() -> None:
        async with receive:
            async for item in receive:
                root = item.message.root
                if isinstance(root, types.JSONRPCRequest) and root.method == "tools/call":
                    ids.calls.append((root.id, str((root.params or {}).get("name"))))
                await write.send(item)

    async with anyio.create_task_group() as group:
        group.start_soon(forward)
        try:
            yield send
        finally:
            await send.aclose()


@contextlib.asynccontextmanager
async def _initialised(read: Any, write: Any, ids: RequestIds | None) -> AsyncIterator[ClientSession]:
    async with _recording(write, ids or RequestIds()) as recorded:
        async with ClientSession(read, recorded) as session:
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def stdio_session(store: Path, *args: str, ids: RequestIds | None = None) -> AsyncIterator[ClientSession]:
    """An initialised session with ``orkeon mcp --store store *args`` over stdio."""
    params = StdioServerParameters(command=ORKEON[0], args=[*ORKEON[1:], "mcp", "--store", str(store), *args])
    async with stdio_client(params) as (read, write):
        async with _initialised(read, write, ids) as session:
            yield session


@contextlib.asynccontextmanager
async def served_session(
    transport: str, store: Path, *args: str, ids: RequestIds | None = None
) -> AsyncIterator[ClientSession]:
    """An initialised session with a fresh ``orkeon mcp`` over ``transport``
    (``stdio``: the client launches it; ``http``: a server process on loopback)."""
    if transport == "stdio":
        async with stdio_session(store, *args, ids=ids) as session:
            yield session
        return
    with http_server(store, *args) as url:
        async with streamable_http_client(url) as (read, write, _):
            async with _initialised(read, write, ids) as session:
                yield session


@contextlib.asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@contextlib.contextmanager
def http_server(store: Path, *args: str) -> Iterator[str]:
    """Run ``orkeon mcp --transport http --port 0`` and yield its URL (read from the
    line it prints once listening); SIGTERM and wait at the end."""
    process = subprocess.Popen(
        [*ORKEON, "mcp", "--store", str(store), "--transport", "http", "--port", "0", *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stderr is not None
        url = None
        for line in process.stderr:
            found = re.search(r"serving on (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url is not None, f"orkeon mcp exited without serving (code {process.wait(10)})"
        drain(process.stderr)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
