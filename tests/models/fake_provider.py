"""A provider on 127.0.0.1 speaking the Chat Completions or the Messages wire format.

Each test scripts what the server answers (:class:`Reply`: a status, headers and a body,
taken in order, or computed from the request by a ``handler``) and reads back every
request it received, parsed, to check the SDK sent exactly the documented fields.
No test needs the internet.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.frozen
class Reply:
    status: int = 200
    body: Any = None  # JSON-encoded unless it is str/bytes
    headers: dict[str, str] = attrs.field(factory=dict)

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, self.headers.get("content-type", "application/octet-stream")
        if isinstance(self.body, str):
            return self.body.encode(), self.headers.get("content-type", "text/html")
        return json.dumps(self.body).encode(), "application/json"


@attrs.frozen
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeProvider:
    """``url`` is the server's root; ``replies`` is consumed in order (or ``handler``
    answers); ``requests`` holds what arrived."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.handler: Callable[[Received], Reply] | None = None
        self.requests: list[Received] = []
        self.hang = False
        """Requests get no answer: ``hanging`` is released as one arrives, ``aborted``
        once its client closed the connection."""
        self.hanging = threading.Semaphore(0)
        self.aborted = threading.Semaphore(0)
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                received = Received(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"null")
                )
                if provider.hang:  # answer nothing; note when the client gives up (closes)
                    provider.hanging.release()
                    while self.connection.recv(1024):
                        pass
                    provider.aborted.release()
                    return
                reply = provider.answer(received)
                body, content_type = reply.encoded()
                self.send_response(reply.status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                for key, value in reply.headers.items():
                    if key.lower() != "content-type":
                        self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-provider", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(self, received: Received) -> Reply:
        with self._lock:
            self.requests.append(received)
            handler = self.handler
        if handler is not None:  # outside the lock: a handler may hold concurrent requests
            return handler(received)
        with self._lock:
            if not self.replies:
                return Reply(500, {"error": {"type": "test_error", "message": "the test scripted no more replies"}})
            return self.replies.pop(0)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def serve() -> Iterator[FakeProvider]:
    provider = FakeProvider()
    try:
        yield provider
    finally:
        provider.close()


class Sleeps:
    """A ``RetryPolicy.sleep`` that records the delays instead of waiting them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@attrs.frozen
class Step:
    """One scripted model turn: text and/or tool calls ``(name, arguments)``."""

    text: str = ""
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    input_tokens: int = 10
    output_tokens: int = 5


def _turn(received: Received) -> int:
    """How many assistant turns the request's conversation holds: the position in the
    script, derived from the history as the provider sees it (so it survives a restart)."""
    return sum(1 for m in received.body["messages"] if m["role"] == "assistant")


def openai_script(*steps: Step) -> Callable[[Received], Reply]:
    """A Chat Completions server playing ``steps`` in conversation order."""

    def handler(received: Received) -> Reply:
        turn = _turn(received)
        step = steps[turn]
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
        if step.calls:
            message["tool_calls"] = [
                {"id": f"call_{turn}_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, (n, a) in enumerate(step.calls)
            ]
        body = {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": 1700000000 + turn,
            "model": received.body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if step.calls else "stop"}],
            "usage": {
                "prompt_tokens": step.input_tokens,
                "completion_tokens": step.output_tokens,
                "total_tokens": step.input_tokens + step.output_tokens,
            },
        }
        return Reply(body=body)

    return handler


def anthropic_script(*steps: Step) -> Callable[[Received], Reply]:
    """A Messages API server playing ``steps`` in conversation order."""

    def handler(received: Received) -> Reply:
        turn = _turn(received)
        step = steps[turn]
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
        content += [
            {"type": "tool_use", "id": f"toolu_{turn}_{i}", "name": n, "input": a}
            for i, (n, a) in enumerate(step.calls)
        ]
        body = {
            "id": f"msg_{turn}",
            "type": "message",
            "role": "assistant",
            "model": received.body["model"],
            "content": content,
            "stop_reason": "tool_use" if step.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": step.input_tokens, "output_tokens": step.output_tokens},
        }
        return Reply(body=body)

    return handler


class Awaited:
    """A provider model whose ``complete`` is awaited on a fresh event loop per call, for
    tests that check one call at a time (other attributes are the model's)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def complete(self, request: Any) -> Any:
        return asyncio.run(self.model.complete(request))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)
