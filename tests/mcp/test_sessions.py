"""One session cannot starve the others: calls are bounded per session (a call over the
bound is refused at once, typed), and a session that goes away frees its slots."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import anyio

from .helpers import http_server, http_session, result_of
from .test_disconnect import _headers_of, _request, raw_session

IDENTITY = ("--crew", "desk", "--agent", "claude")


def quiet(n: int) -> dict[str, object]:
    """A wait that never ends by itself (one cursor per call: the same one twice at once is refused)."""
    return {"topic": f"quiet{n}.*", "wait_forever": True}


def _more(sock: socket.socket) -> bytes:
    chunk = sock.recv(4096)
    assert chunk, "the server closed the stream"
    return chunk


def test_a_session_over_its_bound_is_refused_and_its_slots_come_back_when_it_goes(tmp_path: Path) -> None:
    args = (*IDENTITY, "--max-concurrent-calls", "6", "--max-calls-per-session", "3", "--progress-interval", "0.05")
    with http_server(tmp_path / "h.db", *args) as served:
        hog = raw_session(served)
        held = []
        for n in range(3):
            call = {"name": "wait_for_event", "arguments": quiet(n), "_meta": {"progressToken": n}}
            sock = _request(served, {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": call}, hog)
            answer = _headers_of(sock)
            while b"notifications/progress" not in answer:  # the call runs: it holds a slot
                answer += _more(sock)
            held.append(sock)
        over = {"name": "get_last_value", "arguments": {"key": "k", "crew_scope": "_global"}}
        with _request(served, {"jsonrpc": "2.0", "id": 20, "method": "tools/call", "params": over}, hog) as sock:
            answer = _headers_of(sock)
            while b'"id":20' not in answer.replace(b" ", b""):
                answer += _more(sock)
        data = next(line for line in answer.split(b"\n") if line.startswith(b"data:") and b'"id"' in line)
        refused = json.loads(data[5:])["result"]
        assert refused["isError"] is True
        assert refused["structuredContent"]["error"]["type"] == "LimitExceededError"

        async def main() -> None:
            with anyio.fail_after(90):
                async with http_session(served) as other, http_session(served) as third:
                    # Another session is served although the first holds all it may.
                    found = result_of(await other.call_tool("get_last_value", {"key": "k", "crew_scope": "_global"}))
                    assert found["found"] is False
                    started: set[int] = set()
                    all_running = anyio.Event()

                    async def wait(n: int) -> None:
                        async def beat(progress: float, total: float | None, message: str | None) -> None:
                            started.add(n)
                            if len(started) == 3:
                                all_running.set()

                        await other.call_tool("wait_for_event", quiet(n), progress_callback=beat)

                    async with anyio.create_task_group() as group:
                        for n in range(10, 13):
                            group.start_soon(wait, n)
                        await all_running.wait()  # now every one of the 6 slots is held
                        done = anyio.Event()

                        async def publish() -> None:
                            await third.call_tool("publish_event", {"topic": "other.x", "payload": 1})
                            done.set()

                        group.start_soon(publish)
                        with anyio.move_on_after(1):
                            await done.wait()
                        assert not done.is_set(), "the process-wide bound was not reached"
                        for sock in held:  # the first session's caller goes away
                            sock.close()
                        await done.wait()  # its slots came back
                        group.cancel_scope.cancel()

        anyio.run(main)
