"""A mailbox message handed to an MCP call counts as consumed only once the response
carrying it was written to the transport (issue #34; ``docs/mcp.md``, "No message is
lost when a caller goes away").

``receive_message`` takes its message under a lease
(:class:`~orkeon_actors.hub.port.MailboxLease`); the call's result goes back to the
SDK with the lease registered here, and the transport settles it where the SDK's
response leaves the process, through the transport interfaces the SDK is given:

* **stdio**: :class:`ConfirmingStdout` is the ``stdout`` handed to the SDK's
  ``stdio_server``; the lease is confirmed once the line carrying the response was
  written and flushed to the pipe, given back if that write raised, or if the client
  cancelled the request first (:meth:`Deliveries.cancelled`, told by the stdin side:
  the SDK never answers a cancelled request), or when the transport ends.
* **HTTP**: :func:`watch_responses` wraps the ASGI app; the body chunk that carries
  the response of the request's POST is sent, and the lease is confirmed if the
  connection was still open around that write, given back otherwise, and given back
  if the exchange ends without such a chunk (a cancelled request, a dropped
  connection, an error).
* **in-process** (``Client(server.server)``): no transport to watch; the lease is
  confirmed when the handler returns.

The limit is TCP's and the pipe's: a write the peer's side accepted but its process
never read (it dies at that very instant) is confirmed. Every other way a caller goes
away gives the message back, first in its mailbox.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, MutableMapping
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any, Final

import anyio
from loguru import logger

from orkeon_actors.errors import LeaseRevokedError
from orkeon_actors.hub.port import MailboxLease

__all__ = [
    "SCOPE_KEY",
    "ConfirmingStdout",
    "Deliveries",
    "LeaseHandoff",
    "claimed_stdout",
    "response_ids",
    "settle",
    "watch_responses",
]

SCOPE_KEY: Final = "orkeon.mcp.deliveries"
"""Where :func:`watch_responses` puts the :class:`Deliveries` of one HTTP exchange in
its ASGI scope (the handler reads it through the request's scope)."""

CANCELS_REMEMBERED: Final = 1024
"""Cancelled request ids remembered for a lease registered after its cancel arrived."""

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]
]


def settle(lease: MailboxLease, delivered: bool) -> None:
    """Confirm ``lease`` (the response reached the transport) or give it back."""
    if not delivered:
        lease.give_back()
        return
    try:
        lease.confirm()
    except LeaseRevokedError as exc:  # the mailbox closed (the server stopping): it kept the message
        logger.debug("mcp: {}", exc)


class Deliveries:
    """Leases waiting for the response that carries their message, by JSON-RPC
    request id. Thread-safe; each lease is settled once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Hashable, MailboxLease] = {}
        self._cancelled: OrderedDict[Hashable, None] = OrderedDict()
        self._closed = False

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def expect(self, request_id: Hashable, lease: MailboxLease) -> None:
        """Hold ``lease`` until the response to ``request_id`` is written (or not)."""
        with self._lock:
            cancelled = self._closed or self._cancelled.pop(request_id, 0) is None
            if not cancelled:
                self._pending[request_id] = lease
        if cancelled:  # the client cancelled first, or the exchange is over: no answer will be written
            settle(lease, delivered=False)

    def _take(self, request_id: Hashable) -> MailboxLease | None:
        with self._lock:
            return self._pending.pop(request_id, None)

    def written(self, request_id: Hashable) -> None:
        """The response to ``request_id`` reached the transport."""
        if (lease := self._take(request_id)) is not None:
            settle(lease, delivered=True)

    def failed(self, request_id: Hashable) -> None:
        """The response to ``request_id`` will not reach the client."""
        if (lease := self._take(request_id)) is not None:
            settle(lease, delivered=False)

    def cancelled(self, request_id: Hashable) -> None:
        """The client cancelled ``request_id`` (``notifications/cancelled``): the SDK
        writes no response for it from now on."""
        with self._lock:
            lease = self._pending.pop(request_id, None)
            if lease is None:
                self._cancelled[request_id] = None
                while len(self._cancelled) > CANCELS_REMEMBERED:
                    self._cancelled.popitem(last=False)
        if lease is not None:
            settle(lease, delivered=False)

    def give_back_all(self) -> None:
        """The transport ended: nothing pending will be written."""
        with self._lock:
            self._closed = True
            leases, self._pending = list(self._pending.values()), {}
        for lease in leases:
            settle(lease, delivered=False)


class LeaseHandoff:
    """Hands a lease from the worker thread of a call to its async side: if the async
    side was cancelled first (its caller went away while the hub was handing the
    message out), the lease is given back instead of dropped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lease: MailboxLease | None = None
        self._abandoned = False

    def offer(self, lease: MailboxLease) -> None:
        """From the worker thread: the call's lease."""
        with self._lock:
            abandoned = self._abandoned
            if not abandoned:
                self._lease = lease
        if abandoned:
            lease.give_back()

    def take(self) -> MailboxLease | None:
        """From the async side, the call done: its lease, now the caller's to settle."""
        with self._lock:
            lease, self._lease = self._lease, None
        return lease

    def abandon(self) -> None:
        """From the async side, cancelled: give back the lease, offered or to come."""
        with self._lock:
            self._abandoned = True
            lease, self._lease = self._lease, None
        if lease is not None:
            lease.give_back()


def response_ids(text: str | bytes) -> list[Hashable]:
    """The JSON-RPC ids of the responses (``result`` or ``error``) in ``text``: one
    JSON message, or the ``data:`` lines of server-sent events."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    stripped = text.strip()
    candidates = [stripped] if stripped.startswith("{") else []
    candidates += [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    ids: list[Hashable] = []
    for candidate in candidates:
        try:
            decoded = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(decoded, dict) and "id" in decoded and ("result" in decoded or "error" in decoded):
            request_id = decoded["id"]
            if isinstance(request_id, (str, int)):
                ids.append(request_id)
    return ids


class ConfirmingStdout:
    """The ``stdout`` given to the SDK's ``stdio_server`` (an ``anyio`` text file, as
    it takes one): each line is written and flushed to ``out``, then the lease of the
    response it carries is confirmed; a write or flush that raises gives it back."""

    def __init__(self, out: Any, deliveries: Deliveries) -> None:
        self._out = out
        self._deliveries = deliveries
        self._line = ""

    async def write(self, text: str) -> int:
        self._line = text
        try:
            written: int = await self._out.write(text)
        except BaseException:
            self._settle(delivered=False)
            raise
        return written

    async def flush(self) -> None:
        try:
            await self._out.flush()
        except BaseException:
            self._settle(delivered=False)
            raise
        self._settle(delivered=True)

    def _settle(self, delivered: bool) -> None:
        line, self._line = self._line, ""
        if not line or not self._deliveries.pending:
            return
        for request_id in response_ids(line):
            if delivered:
                self._deliveries.written(request_id)
            else:
                self._deliveries.failed(request_id)


@asynccontextmanager
async def claimed_stdout() -> AsyncIterator[Any]:
    """This process's stdout as an ``anyio`` text file for the protocol alone: while
    serving, file descriptor 1 points at stderr, so stray output (a library's print)
    cannot corrupt the wire (what the SDK does when it opens stdout itself)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd != 1:  # not the process's descriptor (an embedding program's stream): use it as is
        yield anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8", write_through=False))
        return
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)
    try:
        with os.fdopen(wire, "wb", closefd=False) as raw:
            text = TextIOWrapper(raw, encoding="utf-8")
            try:
                yield anyio.wrap_file(text)
            finally:
                text.detach()
    finally:
        os.dup2(wire, 1)
        os.close(wire)


def watch_responses(app: ASGIApp) -> ASGIApp:
    """``app`` (the SDK's streamable HTTP handler) with the response of each exchange
    watched: the lease its handler registered under :data:`SCOPE_KEY` is confirmed
    when the chunk carrying the response was sent on an open connection, given back
    otherwise (see the module docstring)."""

    async def watched(scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        deliveries = Deliveries()
        scope[SCOPE_KEY] = deliveries

        async def connected() -> bool:
            with anyio.CancelScope() as probe:
                probe.cancel()  # answer at once: a disconnect is already queued, or nothing is
                message = await receive()
                return bool(message.get("type") != "http.disconnect")
            return True

        async def send_watched(message: MutableMapping[str, Any]) -> None:
            if not deliveries.pending or message.get("type") != "http.response.body":
                await send(message)
                return
            ids = response_ids(bytes(message.get("body", b"")))
            if not ids:
                await send(message)
                return
            final = not message.get("more_body", False)
            open_before = await connected()
            try:
                await send(message)
            except BaseException:
                for request_id in ids:
                    deliveries.failed(request_id)
                raise
            # After a final chunk the server reports any connection as gone: trust the
            # check made before it (the server drops a chunk for a lost connection).
            delivered = open_before and (final or await connected())
            for request_id in ids:
                (deliveries.written if delivered else deliveries.failed)(request_id)

        try:
            await app(scope, receive, send_watched)
        finally:
            deliveries.give_back_all()

    return watched
