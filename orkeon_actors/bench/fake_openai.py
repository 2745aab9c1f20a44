"""A local fake OpenAI-compatible server for ``orkeon bench agents``: every
``POST .../chat/completions`` is answered after ``latency`` seconds with a one-line
answer and its usage, on one asyncio loop (no thread per connection, so the server never
bounds the client's concurrency), HTTP/1.1 with keep-alive.

``GET /stats`` answers ``{"requests": N, "peak_in_flight": M}``: how many calls it
served and the most it held at once (what the client managed to have in flight).

Run it as its own process (``python -m orkeon_actors.bench.fake_openai --latency 2``):
it prints ``PORT`` on its first line, then serves until stdin closes or it is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Final

__all__ = ["FakeOpenAI", "main"]

_ANSWER: Final = "done"


class FakeOpenAI:
    """The server's state and its connection handler."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the requests of one connection, in order, until the client closes it."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                method, path, _ = request_line.split(" ", 2)
                payload: dict[str, object]
                if method == "GET" and path.endswith("/stats"):
                    payload = {"requests": self.requests, "peak_in_flight": self.peak_in_flight}
                else:
                    payload = await self._complete(json.loads(body or b"{}"))
                data = json.dumps(payload).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed the connection: its requests were all answered
        finally:
            writer.close()

    async def _complete(self, request: dict[str, object]) -> dict[str, object]:
        self.requests += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        return {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": _ANSWER}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
        }


async def _run(latency: float, port: int) -> None:
    fake = FakeOpenAI(latency)
    server = await asyncio.start_server(fake.serve, "127.0.0.1", port, backlog=16_384)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    server.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, required=True, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    args = parser.parse_args(argv)
    asyncio.run(_run(args.latency, args.port))


if __name__ == "__main__":
    main()
