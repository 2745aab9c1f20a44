"""The stdio server survives every sequence of calls and cancellations a client can
send: rounds of concurrent calls, each cancelled as it finishes (before, during and
after its answer is written), against a real ``orkeon mcp`` subprocess. With the 1.x
SDK a cancellation raised while a response was being sent killed the process (rc 1 in
5 of 12 rounds at 10 calls)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import anyio
import pytest

from .helpers import result_of, stdio_session
from .test_stdio_raw import HANDSHAKE, RawStdio

IDENTITY = ("--crew", "desk", "--agent", "claude")


def _answer_to(server: RawStdio, request_id: int) -> dict[str, object]:
    """Read answers until the one to ``request_id`` (cancelled calls may or may not answer)."""
    while True:
        answer = server.answer()
        if answer["id"] == request_id:
            return answer


@pytest.mark.parametrize("concurrent", [10, 70])
def test_cancelling_calls_as_they_finish_never_kills_the_server(tmp_path: Path, concurrent: int) -> None:
    draw = random.Random(concurrent)
    server = RawStdio(tmp_path / "s.db")
    server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HANDSHAKE})
    assert server.answer()["id"] == 0
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    next_id = 1
    for round_ in range(12):
        ids = []
        for n in range(concurrent):
            name, arguments = draw.choice(
                [
                    ("receive_message", {"timeout_ms": draw.randint(1, 5)}),
                    ("publish_event", {"topic": "storm.tick", "payload": n}),
                    ("wait_for_event", {"topic": "storm.*", "timeout_ms": draw.randint(1, 5)}),
                    ("get_last_value", {"key": "k", "crew_scope": "_global"}),
                ]
            )
            call = {"name": name, "arguments": arguments}
            server.send({"jsonrpc": "2.0", "id": next_id, "method": "tools/call", "params": call})
            ids.append(next_id)
            next_id += 1
        time.sleep(draw.choice([0, 0.001, 0.003, 0.01]))  # the cancels land before, during, after the answers
        for request_id in ids:
            params = {"requestId": request_id, "reason": "storm"}
            server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        server.send({"jsonrpc": "2.0", "id": next_id, "method": "ping"})
        assert _answer_to(server, next_id)["result"] == {}, f"round {round_}"
        assert server.process.poll() is None, f"the server died in round {round_}"
        next_id += 1
    posted = server.call(next_id, "post_message", {"target_mailbox": "agent://desk/claude", "payload": "after"})
    message_id = posted["result"]["structuredContent"]["message_id"]
    received = _answer_or_call(server, next_id + 1)
    assert received["message"]["id"] == message_id  # no cancelled receive took it
    assert server.close() == 0


def _answer_or_call(server: RawStdio, request_id: int) -> dict[str, object]:
    call = {"name": "receive_message", "arguments": {"timeout_ms": 5000}}
    server.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call})
    answer = _answer_to(server, request_id)
    result = answer["result"]
    assert isinstance(result, dict)
    content = result["structuredContent"]
    assert isinstance(content, dict)
    return content


def test_the_sdk_client_cancelling_as_calls_finish_never_kills_the_server(tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(180):
            async with stdio_session(tmp_path / "s.db", *IDENTITY) as session:
                draw = random.Random(7)
                for _ in range(12):
                    async with anyio.create_task_group() as group:
                        for n in range(10):

                            async def one(n: int = n) -> None:
                                with anyio.move_on_after(draw.choice([0.001, 0.005, 0.02, 0.05])):
                                    await session.call_tool("publish_event", {"topic": "storm.x", "payload": n})

                            group.start_soon(one)
                await session.send_ping()
                posted = result_of(
                    await session.call_tool("post_message", {"target_mailbox": "agent://desk/claude", "payload": 1})
                )
                got = result_of(await session.call_tool("receive_message", {"timeout_ms": 5000}))
                assert got["message"]["id"] == posted["message_id"]

    anyio.run(main)
