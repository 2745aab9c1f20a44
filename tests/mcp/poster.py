"""A second process: posts one message through an MCP server over streamable HTTP.

``python -m tests.mcp.poster URL TOKEN TARGET PAYLOAD`` prints the tool result as JSON."""

from __future__ import annotations

import json
import sys

import anyio

from tests.mcp.helpers import Served, http_session, result_of


async def main(url: str, token: str, target: str, payload: str) -> None:
    async with http_session(Served(url, token)) as session:
        result = await session.call_tool("post_message", {"target_mailbox": target, "payload": payload})
        print(json.dumps(result_of(result)), flush=True)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
