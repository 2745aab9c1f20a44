"""The Studio's server under hostile clients: idle and slow connections cost no thread and
cannot lock a browser out, and every error, malformed requests included, is clean JSON."""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import ExtraNotInstalledError
from orkeon_actors.studio import StudioServer
from orkeon_actors.studio.feed import event
from orkeon_actors.testing import wait_until

INSTALL_DIR = str(Path(ok.__file__).parent)


@pytest.fixture
def rt() -> Iterator[ok.Runtime]:
    with ok.Runtime.start(studio=0, studio_post=True) as runtime:
        yield runtime


def _raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as is; the status, headers and body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def _get(server: StudioServer, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", path + ("&" if "?" in path else "?") + "token=" + server.token)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, json.loads(body)


def test_many_idle_connections_cost_no_thread_and_lock_nobody_out(rt: ok.Runtime) -> None:
    assert rt.studio is not None
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", rt.studio.port), timeout=10) for _ in range(1_500)]
    try:
        status, state = _get(rt.studio, "/api/state")  # a browser connecting now is served
        assert status == 200 and state["mode"] == "live"
        assert threading.active_count() <= before + 6, "threads grew with the idle connections"

        def closed_by_server() -> int:
            gone = 0
            for sock in idle:
                sock.setblocking(False)
                try:
                    gone += sock.recv(1) == b""
                except BlockingIOError:
                    pass
            return gone

        # beyond the cap, the oldest connections that never sent a request make room
        wait_until(lambda: closed_by_server() >= 1_500 - 256, what="idle connections over the cap closed")
        assert _get(rt.studio, "/api/state")[0] == 200
    finally:
        for sock in idle:
            sock.close()


def test_a_connection_that_never_finishes_its_request_head_is_closed(rt: ok.Runtime) -> None:
    assert rt.studio is not None
    server = StudioServer(rt.studio.source, header_timeout=0.2)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as slow:
            slow.sendall(b"GET /api/state?token=" + server.token.encode() + b" HTTP/1.1\r\nHost: x\r\n")
            assert slow.recv(1024) == b""  # closed by the server, long before this socket's timeout
    finally:
        server.stop()


def _json_error(answer: tuple[int, dict[str, str], bytes], status: int) -> str:
    got, headers, body = answer
    assert got == status, body
    assert headers["content-type"].startswith("application/json"), headers
    text = body.decode()
    assert INSTALL_DIR not in text and "Traceback" not in text
    error = json.loads(text)["error"]
    assert error["status"] == status
    return str(error["message"])


def test_malformed_requests_get_json_errors(rt: ok.Runtime) -> None:
    assert rt.studio is not None
    port, token = rt.studio.port, rt.studio.token.encode()
    assert "malformed" in _json_error(_raw(port, b"NOT HTTP AT ALL\r\n\r\n"), 400)
    bad_length = b"POST /api/post HTTP/1.1\r\nHost: x\r\nX-Studio-Token: " + token + b"\r\nContent-Length: ab\r\n\r\n"
    _json_error(_raw(port, bad_length), 400)
    huge_head = b"GET /api/state HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40_000  # and never ends
    _json_error(_raw(port, huge_head), 400)
    put = b"PUT /api/state?token=" + token + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    _json_error(_raw(port, put), 405)
    missing = b"GET /static/nope.js?token=" + token + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    assert "studio.js" in _json_error(_raw(port, missing), 404)
    for body in (b"[1, 2]", b'"to"', b"{not json", b'{"to": 3}'):
        post = (
            b"POST /api/post HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Studio-Token: "
            + token
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        assert 'send {"to"' in _json_error(_raw(port, post), 400)


class _Broken:
    """A source whose reads fail with a message that names a file on this machine."""

    read_only = True

    def overview(self) -> dict[str, Any]:
        raise RuntimeError(f"cannot read {INSTALL_DIR}/secret.db")

    def snapshot(self, crew_id: str) -> dict[str, Any] | None:
        raise KeyError(crew_id)

    def post(self, to: str, payload: object) -> dict[str, Any]:
        raise AssertionError("not called")

    def visible(self, item: dict[str, Any]) -> bool:
        return True

    def agent_events(self, after: int) -> dict[str, Any]:
        raise AssertionError("not called")


def test_a_failing_read_is_a_json_500_that_names_only_the_type() -> None:
    server = StudioServer(_Broken())
    try:
        token = server.token.encode()
        request = b"GET /api/state?token=" + token + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        message = _json_error(_raw(server.port, request), 500)
        assert "RuntimeError" in message and "secret.db" not in message
        request = request.replace(b"/api/state", b"/api/crews/x/snapshot")
        assert "KeyError" in _json_error(_raw(server.port, request), 500)
    finally:
        server.stop()


def test_a_studio_without_its_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # what a plain install without the extra looks like
    expected = r'uvicorn, not installed here: pip install "orkeon-actors\[studio\]"'
    with pytest.raises(ExtraNotInstalledError, match=expected) as raised:
        ok.Runtime.start(studio=0)
    assert raised.value.extra == "studio"


def test_a_stream_the_browser_stopped_reading_is_ended(rt: ok.Runtime) -> None:
    assert rt.studio is not None and rt.studio.feed is not None
    server = StudioServer(rt.studio.source, rt.studio.feed, write_timeout=0.5)
    try:
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", server.port))
        stalled.sendall(b"GET /api/events?token=" + server.token.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_until(lambda: len(server.streams) == 1, what="the stream attached")
        big, feed = "x" * 200, rt.studio.feed

        def flood_until_dropped() -> bool:  # the browser reads nothing: the server's writes stall
            for n in range(200):
                feed.emit(event("publish", rt.clock.now(), crew="c", topic="t", payload=big, n=n))
            return not server.streams

        wait_until(flood_until_dropped, what="the stalled stream ended")
        stalled.close()
        assert _get(server, "/api/state")[0] == 200  # the server itself is fine
    finally:
        server.stop()
