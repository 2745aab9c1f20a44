"""A small external MCP server for the mcp_tools tests (FastMCP, from the official SDK).

``python -m tests.mcp.calc_server`` serves stdio; ``... http PORT`` streamable HTTP."""

from __future__ import annotations

import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("calc", host="127.0.0.1", port=int(sys.argv[2]) if len(sys.argv) > 2 else 8000)


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
        raise ValueError("cannot divide by zero")
    return a / b


if __name__ == "__main__":
    server.run(transport="streamable-http" if sys.argv[1:2] == ["http"] else "stdio")
