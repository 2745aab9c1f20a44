"""The Studio's connection bounds: uvicorn's HTTP/1.1 protocol with a header deadline, a
connection cap and JSON errors.

uvicorn times out a connection only once it has answered a request on it (its keep-alive
timeout); a client that connects and sends nothing, or sends its headers a byte at a time,
holds its connection for ever. :func:`bounded_protocol` makes the protocol class the
Studio's uvicorn server runs (``uvicorn.Config(http=...)``, its documented extension point),
which adds:

* **a header deadline**: a connection that has not sent a complete request head within
  ``header_timeout`` seconds of connecting is closed;
* **a connection cap**: at most ``max_connections`` connections are open. A new
  connection over the cap closes the *oldest connection still waiting for its first
  request* (an idle, unauthenticated one: a browser sends its request as soon as it
  connects), so idle connections can never lock a browser out; if every open connection
  is busy with a request, the new one is closed instead;
* **JSON errors**: a request the HTTP parser rejects (a malformed request line or header,
  a non-numeric ``Content-Length``, a head over 16 KiB) gets the Studio's JSON error body,
  ``{"error": {"status": 400, "message": ...}}``, not uvicorn's plain text.

Everything runs on the server's one event-loop thread: a connection costs a socket and a
few objects, never a thread.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ConnectionBounds", "bounded_protocol", "json_error_body"]


def json_error_body(status: int, message: str) -> bytes:
    """The body of every error the Studio answers."""
    return json.dumps({"error": {"status": status, "message": message}}).encode()


@dataclass
class ConnectionBounds:
    """The limits one Studio server enforces, and what it counts against them."""

    max_connections: int = 256
    """Open connections at most (a browser tab uses a handful)."""
    header_timeout: float = 10.0
    """Seconds a new connection has to send its first request head."""
    waiting: OrderedDict[Any, None] = field(default_factory=OrderedDict)
    """Connections that have not sent a request yet, oldest first."""
    open: set[Any] = field(default_factory=set)
    """Every open connection."""
    evicted: int = 0
    """Idle connections closed to make room for a new one."""
    timed_out: int = 0
    """Connections closed because their request head did not arrive in time."""


def bounded_protocol(bounds: ConnectionBounds) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class, bounded by ``bounds`` (see the module docstring)."""

    class BoundedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(bounds.open) >= bounds.max_connections:
                if not bounds.waiting:  # every connection is busy with a request: refuse this one
                    self._refused = True
                    transport.abort()
                    return
                oldest, _ = bounds.waiting.popitem(last=False)
                bounds.evicted += 1
                oldest.close_idle()
            super().connection_made(transport)
            bounds.open.add(self)
            bounds.waiting[self] = None
            self._deadline = self.loop.call_later(bounds.header_timeout, self._header_timed_out)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._deadline is not None and self.cycle is not None:  # a request head arrived
                self._deadline.cancel()
                self._deadline = None
                bounds.waiting.pop(self, None)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:  # refused in connection_made: uvicorn never saw it
                return
            self._forget()
            super().connection_lost(exc)

        def _forget(self) -> None:
            bounds.open.discard(self)
            bounds.waiting.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _header_timed_out(self) -> None:
            self._deadline = None
            bounds.timed_out += 1
            self.close_idle()

        def close_idle(self) -> None:
            """Close a connection that never sent a request (it is owed no answer)."""
            self._forget()
            self.transport.abort()

        def send_400_response(self, msg: str) -> None:
            body = json_error_body(400, f"malformed HTTP request: {msg}")
            headers = [
                (b"content-type", b"application/json; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            for event in (h11.Response(status_code=400, headers=headers), h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")
            self.transport.close()

    return BoundedH11Protocol
