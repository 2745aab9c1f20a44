"""Every line a stdio client sends gets an answer, a malformed one included.

The SDK's stdio transport turns a line it cannot read as one JSON-RPC message into an
exception item on its read stream, and its server drops such items: the client that
sent truncated JSON, a batch (``[...]``, not part of MCP since 2025-06-18), nesting
deeper than the parser's limit of 200 or a number too long to read waits for its
timeout. :func:`answer_malformed` sits between the transport and the server and answers
each such line at once with a JSON-RPC error (JSON-RPC 2.0 §5.1: ``id`` null, since
the id could not be read): ``-32700`` (parse error) for text that is not JSON the
parser accepts, ``-32600`` (invalid request) for JSON that is not one MCP message.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["answer_malformed", "malformed_error"]

MAX_DETAIL: int = 200
"""Characters of the parser's complaint quoted back (never the client's whole line)."""


def malformed_error(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read."""
    if isinstance(exc, ValidationError):
        problems = exc.errors()
        invalid_json = any(problem["type"] == "json_invalid" for problem in problems)
        detail = str(problems[0]["msg"]) if problems else str(exc)
    else:
        invalid_json, detail = True, str(exc)
    if invalid_json:
        code, message = types.PARSE_ERROR, f"Parse error: {detail[:MAX_DETAIL]}"
    else:
        code = types.INVALID_REQUEST
        message = "Invalid Request: each line must be one JSON-RPC 2.0 request, notification or response object"
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))


@contextlib.asynccontextmanager
async def answer_malformed(
    read_stream: Any, write_stream: Any, observe: Callable[[SessionMessage], None] | None = None
) -> AsyncIterator[Any]:
    """Yield a read stream for the server with the transport's well-formed messages;
    each exception item is answered on ``write_stream`` instead (see the module docstring).
    ``observe`` is called with each well-formed message before the server gets it."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def relay() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, Exception):
                    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        await write_stream.send(SessionMessage(malformed_error(item)))
                    continue
                if observe is not None:
                    observe(item)
                try:
                    await send.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the server stopped reading

    async with receive, anyio.create_task_group() as group:
        group.start_soon(relay)
        yield receive
        group.cancel_scope.cancel()
