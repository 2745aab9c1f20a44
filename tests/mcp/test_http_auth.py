"""``orkeon mcp --transport http`` lets in only whom the operator meant: the bearer
token, ``Host`` and ``Origin`` checked against the bound address, loopback unless told
otherwise, bounded bodies. Driven with raw sockets (any header a hostile client can
send) and with the SDK's client."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from .helpers import ORKEON, Served, http_server, http_session, result_of

IDENTITY = ("--crew", "desk", "--agent", "claude")
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
).encode()


def raw_post(served: Served, headers: dict[str, str], body: bytes = INITIALIZE) -> tuple[int, bytes]:
    """POST ``body`` to the server with exactly ``headers`` (Host included) over a raw
    socket; the status code and the response's first bytes."""
    parts = urlsplit(served.url)
    assert parts.hostname is not None and parts.port is not None
    lines = [f"POST {parts.path} HTTP/1.1", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        try:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        except (BrokenPipeError, ConnectionResetError):  # refused before the body was read whole
            pass
        answer = b""
        while len(answer) < 65536:  # "Connection: close": the server ends the response
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer


def good_headers(served: Served) -> dict[str, str]:
    return {
        "Host": urlsplit(served.url).netloc,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {served.token}",
    }


def test_every_request_needs_the_bearer_token(tmp_path: Path) -> None:
    with http_server(tmp_path / "h.db", *IDENTITY) as served:
        headers = good_headers(served)
        assert raw_post(served, headers)[0] == 200
        del headers["Authorization"]
        status, answer = raw_post(served, headers)
        assert status == 401 and b"bearer token" in answer
        for wrong in (f"Bearer {served.token[:-1]}", f"Basic {served.token}", "Bearer", f"Bearer {served.token}x"):
            assert raw_post(served, {**headers, "Authorization": wrong})[0] == 401, wrong


@pytest.mark.parametrize(
    "host",
    ["0.0.0.0:{port}", "evil.example:{port}", "127.0.0.1:1", "127.0.0.1", "localhost.evil.example:{port}", ""],
)
def test_a_host_header_not_naming_the_bound_address_is_refused(tmp_path: Path, host: str) -> None:
    with http_server(tmp_path / "h.db", *IDENTITY) as served:
        port = urlsplit(served.url).port
        status, _ = raw_post(served, {**good_headers(served), "Host": host.format(port=port)})
        assert status == 421
        assert raw_post(served, {**good_headers(served), "Host": f"localhost:{port}"})[0] == 200


def test_a_foreign_origin_is_refused(tmp_path: Path) -> None:
    with http_server(tmp_path / "h.db", *IDENTITY) as served:
        port = urlsplit(served.url).port
        for origin in ("http://evil.example", f"http://evil.example:{port}", f"https://127.0.0.1:{port}", "null"):
            assert raw_post(served, {**good_headers(served), "Origin": origin})[0] == 403, origin
        assert raw_post(served, {**good_headers(served), "Origin": f"http://127.0.0.1:{port}"})[0] == 200


def test_the_operator_can_give_the_token(tmp_path: Path) -> None:
    token = "an-operator-chosen-token-0123456789"
    with http_server(tmp_path / "h.db", *IDENTITY, env={"ORKEON_MCP_TOKEN": token}) as served:
        assert served.token == token

        async def main() -> None:
            async with http_session(served) as session:
                posted = await session.call_tool(
                    "post_message", {"target_mailbox": "agent://desk/claude", "payload": 1}
                )
                assert result_of(posted)["message_id"]

        anyio.run(main)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--host", "0.0.0.0"), "--allow-remote"),
        (("--host", "192.0.2.1"), "--allow-remote"),
        (("--host", "0.0.0.0", "--allow-remote"), "--allow-host"),
    ],
)
def test_a_non_loopback_bind_needs_explicit_flags(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    done = subprocess.run(
        [*ORKEON, "mcp", "--store", str(tmp_path / "h.db"), *IDENTITY, "--transport", "http", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert said in done.stderr and "Traceback" not in done.stderr


def test_a_wildcard_bind_accepts_only_the_named_host(tmp_path: Path) -> None:
    args = (*IDENTITY, "--host", "0.0.0.0", "--allow-remote", "--allow-host", "mcp.internal.example")
    with http_server(tmp_path / "h.db", *args) as served:
        port = urlsplit(served.url).port
        loopback = Served(f"http://127.0.0.1:{port}/mcp", served.token)
        headers = good_headers(loopback)
        assert raw_post(loopback, {**headers, "Host": f"0.0.0.0:{port}"})[0] == 421
        assert raw_post(loopback, {**headers, "Host": f"127.0.0.1:{port}"})[0] == 421
        assert raw_post(loopback, {**headers, "Host": f"mcp.internal.example:{port}"})[0] == 200


def test_a_large_body_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    with http_server(tmp_path / "h.db", *IDENTITY) as served:
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"x" * (8 << 20) + b'"}}'
        status, _ = raw_post(served, good_headers(served), body)
        assert status == 413
        assert raw_post(served, good_headers(served))[0] == 200  # and the server still serves
