"""``orkeon mcp`` over stdio, driven by raw lines (whatever a broken or hostile client
writes): every line gets an answer, and nothing a client sends makes it lose a message."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pytest

from .helpers import ORKEON

IDENTITY = ("--crew", "desk", "--agent", "claude")
HANDSHAKE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}


class RawStdio:
    """A real ``orkeon mcp`` subprocess and its stdin/stdout, line by line."""

    def __init__(self, store: Path) -> None:
        self.process = subprocess.Popen(
            [*ORKEON, "mcp", "--store", str(store), *IDENTITY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
        )
        self.lines: Queue[str] = Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send_line(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(json.dumps(message))

    def answer(self, timeout: float = 30) -> dict[str, Any]:
        """The next message that is not a notification."""
        while True:
            try:
                message: dict[str, Any] = json.loads(self.lines.get(timeout=timeout))
            except Empty:
                raise AssertionError(f"no answer within {timeout}s (server rc {self.process.poll()})") from None
            if "id" in message:
                return message

    def call(self, request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        answer = self.answer()
        assert answer["id"] == request_id, answer
        return answer

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(30)


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    """One server for the module: each test leaves its mailbox empty."""
    server = RawStdio(tmp_path_factory.mktemp("raw") / "s.db")
    server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HANDSHAKE})
    assert server.answer()["result"]["protocolVersion"] == "2025-06-18"
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(10)


MALFORMED = {
    "truncated JSON": ('{"jsonrpc": "2.0", "id": 7, "method": "tools/list"', -32700),
    "a batch": ('[{"jsonrpc": "2.0", "id": 7, "method": "ping"}]', -32600),
    "nesting 200 deep": (
        '{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": ' + "[" * 200 + "]" * 200 + "}}",
        -32700,
    ),
    "a 5,000-digit integer": (
        '{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": ' + "9" * 5000 + "}}",
        -32700,
    ),
    "a 5,000-digit id": ('{"jsonrpc": "2.0", "id": ' + "9" * 5000 + ', "method": "ping"}', -32700),
    "not JSON at all": ("hello", -32700),
    "a JSON string": ('"ping"', -32600),
    "an object that is no message": ('{"hello": 1}', -32600),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_line_gets_a_json_rpc_error_and_the_server_goes_on(raw: RawStdio, case: str) -> None:
    line, code = MALFORMED[case]
    raw.send_line(line)
    error = raw.answer()
    assert error["id"] is None and error["error"]["code"] == code, error
    assert len(json.dumps(error)) < 1000  # the complaint, not the client's line echoed back
    posted = raw.call(1, "post_message", {"target_mailbox": "agent://desk/claude", "payload": case})
    assert posted["result"]["isError"] is False
    received = raw.call(2, "receive_message", {"timeout_ms": 5000})
    assert received["result"]["structuredContent"]["message"]["payload"] == case


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
@pytest.mark.parametrize("where", ["payload", "nested"])
def test_non_finite_numbers_are_refused_not_stored(raw: RawStdio, number: str, where: str) -> None:
    payload = number if where == "payload" else '{"a": [1, ' + number + "]}"
    raw.send_line(
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "post_message", "arguments": '
        '{"target_mailbox": "agent://desk/claude", "payload": ' + payload + "}}}"
    )
    answer = raw.answer()
    assert answer["id"] == 1
    result = answer["result"]
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert (error["type"], error["field"]) == ("ToolValidationError", "payload"), error
    nothing = raw.call(2, "receive_message", {"timeout_ms": 100})
    assert nothing["result"]["structuredContent"]["timed_out"] is True  # nothing was stored


def test_end_of_input_ends_the_server_cleanly(tmp_path: Path) -> None:
    server = RawStdio(tmp_path / "s.db")
    server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HANDSHAKE})
    assert server.answer()["id"] == 0
    assert server.close() == 0
