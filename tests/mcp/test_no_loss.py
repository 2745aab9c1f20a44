"""A mailbox message handed to an MCP call counts as consumed only once its response
reached the transport; otherwise it stays in the mailbox, first, in order (issue #34,
docs/mcp.md "No message is lost when a caller goes away").

Each test watches the wire itself: the official client drops a response that arrives
after its caller cancelled, so the tests tap the client's transport and see every
response the server wrote, late ones included. Every posted message must reach the
wire; none may reach two callers that accepted it; accepted and drained messages come
in post order."""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage

from orkeon_actors.testing import wait_until

from .helpers import http_server, http_session, result_of, speaking, stdio_params
from .test_disconnect import IDENTITY, ME, _headers_of, _request, raw_session
from .test_stdio_raw import HANDSHAKE

ROUNDS = 12


def _message_id(result: Any) -> str | None:
    if isinstance(result, dict):
        message = (result.get("structuredContent") or {}).get("message")
        if isinstance(message, dict):
            return str(message["id"])
    return None


@contextlib.asynccontextmanager
async def tapped(transport: Any, wire: list[str]) -> AsyncIterator[tuple[Any, Any]]:
    """``transport``'s streams, with the id of every received message that reaches the
    client (in a response, accepted or not) appended to ``wire``."""
    async with transport as streams:
        read, write = streams[0], streams[1]
        forward, relayed = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with forward:
                async for item in read:
                    if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCResponse):
                        if (message_id := _message_id(item.message.result)) is not None:
                            wire.append(message_id)
                    await forward.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            yield relayed, write
            group.cancel_scope.cancel()


async def _post(session: Any, payload: object) -> str:
    return str(
        result_of(await session.call_tool("post_message", {"target_mailbox": ME, "payload": payload}))["message_id"]
    )


async def _drain(session: Any) -> list[str]:
    drained = []
    while not (got := result_of(await session.call_tool("receive_message", {"timeout_ms": 300})))["timed_out"]:
        drained.append(got["message"]["id"])
    return drained


def _check(posted: list[str], wire: list[str], accepted: list[str]) -> None:
    """Nothing lost (every posted message reached the wire), nothing twice to callers
    that accepted it, and what was accepted came in post order."""
    assert set(wire) == set(posted), f"lost: {set(posted) - set(wire)}"
    assert len(accepted) == len(set(accepted)), "a message reached two callers that accepted it"
    assert set(accepted) <= set(posted)
    assert accepted == sorted(accepted, key=posted.index), "accepted out of order"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_cancel_at_the_instant_of_delivery_loses_nothing(tmp_path: Path, transport: str) -> None:
    """The caller cancels its receive_message right as a post reaches it, round after
    round: the message is either in a response the server wrote (which the client drops
    if it cancelled first) or still in the mailbox for the next call, never consumed
    without an answer on the wire."""
    wire: list[str] = []
    posted: list[str] = []
    accepted: list[str] = []
    rng = random.Random(34)

    async def rounds(session: Any) -> None:
        for n in range(ROUNDS):
            scope = anyio.CancelScope()

            async def receive(scope: anyio.CancelScope = scope) -> None:
                with scope:
                    got = result_of(await session.call_tool("receive_message", {"wait_forever": True}))
                    accepted.append(got["message"]["id"])

            async with anyio.create_task_group() as group:
                group.start_soon(receive)
                await anyio.sleep(rng.uniform(0, 0.02))  # the receive may or may not be waiting yet
                posted.append(await _post(session, n))
                await anyio.sleep(rng.uniform(0, 0.004))  # cancel around the instant it is handed out
                scope.cancel()
        accepted.extend(await _drain(session))

    async def main() -> None:
        with anyio.fail_after(120):
            if transport == "stdio":
                source: Any = stdio_client(stdio_params(tmp_path / "s.db", *IDENTITY))
                async with speaking(tapped(source, wire)) as session:
                    await rounds(session)
            else:
                with http_server(tmp_path / "h.db", *IDENTITY) as served:
                    async with speaking(tapped(served.transport(), wire)) as session:
                        await rounds(session)

    anyio.run(main)
    # A message whose response the server wrote before the cancel arrived is on the
    # wire only (the client drops a late response): that is the transport's limit.
    _check(posted, wire, accepted)


def test_a_dropped_http_connection_gives_its_message_back(tmp_path: Path) -> None:
    """Posts made right after the caller dropped its connection, before the server
    notices, reach the next reader: the dying call's response found no connection."""
    with http_server(tmp_path / "h.db", *IDENTITY) as served:
        session_id = raw_session(served)
        for n in range(3):
            call = {"name": "receive_message", "arguments": {"wait_forever": True}}
            sock = _request(
                served, {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": call}, session_id
            )
            _headers_of(sock)  # the call waits
            sock.close()  # the caller goes away; the server notices within its poll

        async def main() -> None:
            with anyio.fail_after(60):
                async with http_session(served) as session:
                    posted = [await _post(session, n) for n in range(3)]  # at once: the orphans may take them
                    assert await _drain(session) == posted

        anyio.run(main)


KILLED_CLIENT = """
import json, os, subprocess, sys
server = subprocess.Popen(json.loads(sys.argv[1]), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
print(server.pid, flush=True)
def send(*messages):
    server.stdin.write(b"".join((json.dumps(m) + "\\n").encode() for m in messages))
    server.stdin.flush()
def answer(request_id):
    while json.loads(server.stdout.readline()).get("id") != request_id:
        pass
send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": json.loads(sys.argv[2])})
answer(0)
post = {"name": "post_message", "arguments": {"target_mailbox": sys.argv[3], "payload": "last words"}}
initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
send(initialized, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": post})
answer(1)  # accepted: kept in the store
waiting = {"name": "receive_message", "arguments": {"wait_forever": True}}
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": waiting})
os._exit(0)  # dies at once: the server hands the message to the call and answers into a closed pipe
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


def test_a_killed_stdio_client_loses_nothing(tmp_path: Path) -> None:
    """The client posts, then dies right after sending a receive_message: the server
    hands the message to that call, its answer finds the pipe closed (or the end of
    input cancels the call), and the next server on the store holds the message."""
    store = tmp_path / "s.db"
    command = [*stdio_params(store, *IDENTITY).command.split(), *stdio_params(store, *IDENTITY).args]
    client = subprocess.run(
        [sys.executable, "-c", KILLED_CLIENT, json.dumps(command), json.dumps(HANDSHAKE), ME],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    server_pid = int(client.stdout.split()[0])
    wait_until(lambda: _gone(server_pid), timeout=120, what="the orphaned server to end")

    async def main() -> list[str]:
        with anyio.fail_after(120):
            async with speaking(stdio_client(stdio_params(store, *IDENTITY))) as session:
                return await _drain(session)

    assert len(anyio.run(main)) == 1, "the message handed to the dead client's call is not back in its mailbox"
