"""No message is lost when an MCP caller goes away: a wait whose caller disconnected,
cancelled or timed out is withdrawn, so the next post stays in the mailbox for the next
call, in order. Real ``orkeon mcp`` processes, the SDK's client and raw sockets."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from .helpers import Served, http_server, http_session, result_of, served_session
from .test_stdio_raw import HANDSHAKE, RawStdio

IDENTITY = ("--crew", "desk", "--agent", "claude")
ME = "agent://desk/claude"


def _request(served: Served, body: dict[str, Any], session_id: str | None = None) -> socket.socket:
    """Send one POST over a fresh raw socket and return the socket (the response unread)."""
    parts = urlsplit(served.url)
    assert parts.hostname is not None and parts.port is not None
    data = json.dumps(body).encode()
    lines = [
        f"POST {parts.path} HTTP/1.1",
        f"Host: {parts.netloc}",
        f"Authorization: Bearer {served.token}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "MCP-Protocol-Version: 2025-06-18",
        f"Content-Length: {len(data)}",
    ]
    if session_id is not None:
        lines.append(f"Mcp-Session-Id: {session_id}")
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
    return sock


def _headers_of(sock: socket.socket) -> bytes:
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, answer
        answer += chunk
    return answer


def raw_session(served: Served) -> str:
    """Initialise a session over a raw socket; its Mcp-Session-Id."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    with _request(served, init) as sock:
        head = _headers_of(sock).decode("latin-1")
    session_id = next(
        line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("mcp-session-id:")
    )
    with _request(served, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id) as sock:
        assert b" 202 " in _headers_of(sock)
    return session_id


async def post_then_receive(session: Any, count: int) -> None:
    """Post ``count`` messages, then receive them: every one, in order."""
    posted = []
    for n in range(count):
        answer = await session.call_tool("post_message", {"target_mailbox": ME, "payload": n})
        posted.append(result_of(answer)["message_id"])
    for message_id in posted:
        got = result_of(await session.call_tool("receive_message", {"timeout_ms": 5000}))
        assert got["timed_out"] is False and got["message"]["id"] == message_id


def session_is_full(served: Served, session_id: str) -> bool:
    """Whether ``session_id`` still holds all its call slots (a call is refused)."""
    call = {"name": "get_last_value", "arguments": {"key": "k", "crew_scope": "_global"}}
    with _request(served, {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": call}, session_id) as sock:
        answer = _headers_of(sock)
        while b"isError" not in answer:
            chunk = sock.recv(4096)
            assert chunk, answer
            answer += chunk
    return b"LimitExceededError" in answer


def test_a_dropped_http_connection_withdraws_its_waits(tmp_path: Path) -> None:
    args = (*IDENTITY, "--progress-interval", "0.05", "--max-calls-per-session", "3")
    with http_server(tmp_path / "h.db", *args) as served:
        session_id = raw_session(served)
        orphans = []
        for n in range(3):
            call = {
                "jsonrpc": "2.0",
                "id": 10 + n,
                "method": "tools/call",
                "params": {
                    "name": "receive_message",
                    "arguments": {"wait_forever": True},
                    "_meta": {"progressToken": n},
                },
            }
            sock = _request(served, call, session_id)
            _headers_of(sock)  # the call runs: its SSE stream is open
            orphans.append(sock)
        assert session_is_full(served, session_id)
        for sock in orphans:  # the caller goes away without a word
            sock.close()
        # The server notices within its poll (0.1 s): the session's slots come back. A
        # post made before then is given back by the dying call (tests/mcp/test_no_loss.py).
        deadline = time.monotonic() + 30
        while session_is_full(served, session_id):
            assert time.monotonic() < deadline, "the dropped calls were never withdrawn"

        async def main() -> None:
            with anyio.fail_after(60):
                async with http_session(served) as session:
                    await post_then_receive(session, 3)

        anyio.run(main)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_client_read_timeout_withdraws_the_wait(tmp_path: Path, transport: str) -> None:
    async def main() -> None:
        with anyio.fail_after(90):
            async with served_session(transport, tmp_path / "s.db", *IDENTITY) as session:
                for _ in range(3):
                    with pytest.raises(MCPError, match="timed out"):
                        await session.call_tool("receive_message", {"wait_forever": True}, read_timeout_seconds=0.3)
                await post_then_receive(session, 3)

    anyio.run(main)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_cancelled_caller_withdraws_the_wait(tmp_path: Path, transport: str) -> None:
    async def main() -> None:
        with anyio.fail_after(90):
            async with served_session(transport, tmp_path / "s.db", *IDENTITY) as session:
                for _ in range(3):
                    with anyio.move_on_after(0.3):
                        await session.call_tool("receive_message", {"wait_forever": True})
                await post_then_receive(session, 3)

    anyio.run(main)


def test_a_stdio_client_that_leaves_with_waits_pending_ends_the_server_cleanly(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    server = RawStdio(store)
    server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HANDSHAKE})
    assert server.answer()["id"] == 0
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for n in range(1, 4):
        call = {"name": "receive_message", "arguments": {"wait_forever": True}}
        server.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call})
    assert server.close() == 0  # the pending waits were withdrawn, the runtime stopped

    async def main() -> None:
        with anyio.fail_after(60):
            async with served_session("stdio", store, *IDENTITY) as session:
                await post_then_receive(session, 3)

    anyio.run(main)
