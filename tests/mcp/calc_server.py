"""A small external MCP server for the mcp_tools tests (MCPServer, from the official SDK).

``python -m tests.mcp.calc_server`` serves stdio; ``... http PORT`` streamable HTTP."""

from __future__ import annotations

import asyncio
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")  # shown to the client (any other exception is not)
    return a / b


_arrived: dict[str, int] = {}
_all_there: dict[str, asyncio.Event] = {}


@server.tool()
async def rendezvous(name: str, parties: int) -> int:
    """Answer once ``parties`` calls named ``name`` are in flight at once (a barrier)."""
    _arrived[name] = _arrived.get(name, 0) + 1
    event = _all_there.setdefault(name, asyncio.Event())
    if _arrived[name] >= parties:
        event.set()
    await event.wait()
    return _arrived[name]


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
