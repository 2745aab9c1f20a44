"""Every protocol revision clients speak today, each spoken by the SDK's own client
asking for exactly that revision, over stdio and over streamable HTTP."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from orkeon_actors.tools import tool_definitions

from .helpers import REVISIONS, result_of, served_definitions, served_session

IDENTITY = ("--crew", "desk", "--agent", "claude")


def test_the_sdk_speaks_the_revisions_served() -> None:
    assert REVISIONS == ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("revision", REVISIONS)
def test_each_revision_lists_posts_and_receives(tmp_path: Path, transport: str, revision: str) -> None:
    async def main() -> None:
        with anyio.fail_after(90):
            async with served_session(transport, tmp_path / "s.db", *IDENTITY, revision=revision) as session:
                assert served_definitions(await session.list_tools()) == tool_definitions(style="mcp")
                posted = result_of(
                    await session.call_tool("post_message", {"target_mailbox": "agent://desk/claude", "payload": 1})
                )
                received = result_of(await session.call_tool("receive_message", {"timeout_ms": 5000}))
                assert received["message"]["id"] == posted["message_id"]
                refused = await session.call_tool("receive_message", {"timeout_ms": 0})
                assert refused.is_error is True
                assert result_of(refused)["error"]["field"] == "timeout_ms"

    anyio.run(main)
