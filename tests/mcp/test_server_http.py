"""``orkeon mcp --transport http``: a server process on loopback, driven by the SDK's
streamable HTTP client, with a wait answered by a post from another process.

The store has one writer per file (a second runtime on it gets ``StoreLockedError``),
so the server process owns the runtime and every other process reaches the hub through
it: here a separate Python process connects its own MCP session and posts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import orkeon_actors as ok
from orkeon_actors.errors import StoreLockedError
from orkeon_actors.tools import tool_definitions

from .helpers import http_server, http_session, result_of, served_definitions

IDENTITY = ("--crew", "desk", "--agent", "claude")
ROOT = Path(__file__).resolve().parents[2]


def test_http_lists_the_tools_and_a_wait_is_answered_by_another_process(tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    with http_server(store, *IDENTITY) as served:
        with pytest.raises(StoreLockedError):  # why the other process goes through the server
            ok.Runtime.start(store=str(store))

        async def main() -> None:
            async with http_session(served) as session:
                listed = await session.list_tools()
                assert served_definitions(listed) == tool_definitions(style="mcp")
                got: list[dict[str, Any]] = []

                async def wait() -> None:
                    got.append(result_of(await session.call_tool("receive_message", {"timeout_ms": 60_000})))

                async with anyio.create_task_group() as group:
                    group.start_soon(wait)
                    poster = await anyio.run_process(
                        [
                            sys.executable,
                            "-m",
                            "tests.mcp.poster",
                            served.url,
                            served.token,
                            "agent://desk/claude",
                            "from afar",
                        ],
                        cwd=ROOT,
                    )
                posted = json.loads(poster.stdout)
                assert got[0]["timed_out"] is False
                message = got[0]["message"]
                assert message["id"] == posted["message_id"] and message["payload"] == "from afar"
                # The poster is another MCP session of the same launch identity (§6.1).
                assert (message["source_crew_id"], message["source_agent_id"]) == ("desk", "claude")

        anyio.run(main)


def test_http_failures_are_is_error_results(tmp_path: Path) -> None:
    with http_server(tmp_path / "h.db", *IDENTITY) as served:

        async def main() -> None:
            async with http_session(served) as session:
                result = await session.call_tool(
                    "send_request", {"target_mailbox": "topic://x", "payload": 1, "timeout_ms": 10}
                )
                assert result.is_error is True
                assert result_of(result)["error"]["field"] == "target_mailbox"

        anyio.run(main)


def test_posts_kept_on_the_store_survive_the_server(tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    with http_server(store, *IDENTITY) as served:

        async def post() -> None:
            async with http_session(served) as session:
                posted = result_of(
                    await session.call_tool(
                        "post_message", {"target_mailbox": "agent://desk/claude", "payload": "later"}
                    )
                )
                assert posted["message_id"]

        anyio.run(post)
    with http_server(store, *IDENTITY) as served:  # a new server process on the same file

        async def receive() -> None:
            async with http_session(served) as session:
                got = result_of(await session.call_tool("receive_message", {"timeout_ms": 10_000}))
                assert got["message"]["payload"] == "later"

        anyio.run(receive)
