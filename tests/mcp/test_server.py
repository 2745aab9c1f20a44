"""``orkeon mcp`` driven by the official MCP SDK client, over stdio (a real subprocess
the client launches) and over streamable HTTP (a server process on loopback)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from orkeon_actors.tools import tool_definitions

from .helpers import result_of, served_definitions, served_session

IDENTITY = ("--crew", "desk", "--agent", "claude")


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main)


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_list_tools_answers_the_mcp_definitions_exactly(tmp_path: Path, transport: str) -> None:
    async def main() -> None:
        async with served_session(transport, tmp_path / "s.db", *IDENTITY) as session:
            listed = await session.list_tools()
        assert served_definitions(listed) == tool_definitions(style="mcp")

    run(main)


def test_each_tool_works_and_the_identity_is_the_launch_one(tmp_path: Path, transport: str) -> None:
    async def main() -> None:
        async with served_session(transport, tmp_path / "s.db", *IDENTITY) as session:
            published = result_of(
                await session.call_tool(
                    "publish_event",
                    {"topic": "notes.saved", "payload": {"n": 1}, "retain_as_last_value": True, "last_value_key": "n"},
                )
            )
            assert published["event_id"]
            last = result_of(await session.call_tool("get_last_value", {"key": "n", "crew_scope": "_global"}))
            assert last["found"] is True and last["value"] == {"n": 1}

            posted = result_of(
                await session.call_tool("post_message", {"target_mailbox": "agent://desk/claude", "payload": "hi"})
            )
            received = result_of(await session.call_tool("receive_message", {"timeout_ms": 5000}))
            message = received["message"]
            assert received["timed_out"] is False and message["id"] == posted["message_id"]
            assert (message["source_crew_id"], message["source_agent_id"]) == ("desk", "claude")  # §6.1

            nothing = result_of(await session.call_tool("wait_for_event", {"topic": "quiet.*", "timeout_ms": 50}))
            assert nothing["timed_out"] is True

            async with anyio.create_task_group() as group:
                answers: list[dict[str, Any]] = []

                async def ask() -> None:
                    request = {"target_mailbox": "agent://desk/claude", "payload": "ping", "timeout_ms": 20_000}
                    answers.append(result_of(await session.call_tool("send_request", request)))

                group.start_soon(ask)
                request = result_of(await session.call_tool("receive_message", {"timeout_ms": 10_000}))["message"]
                replied = result_of(
                    await session.call_tool(
                        "reply_to", {"correlation_id": request["correlation_id"], "payload": "pong"}
                    )
                )
                assert replied["replied_at"]
            assert answers[0]["timed_out"] is False and answers[0]["response_payload"] == "pong"

            async with anyio.create_task_group() as group:
                events: list[dict[str, Any]] = []

                async def wait() -> None:
                    got = await session.call_tool("wait_for_event", {"topic": "jobs.*", "timeout_ms": 20_000})
                    events.append(result_of(got))

                group.start_soon(wait)
                # The wait sees only events published after it started: publish until it has one.
                while not events:
                    await session.call_tool("publish_event", {"topic": "jobs.done", "payload": 7})
                    await anyio.sleep(0.05)
            assert events[0]["message"]["topic"] == "jobs.done"

    run(main)


def test_failures_are_results_with_is_error_carrying_the_typed_error(tmp_path: Path, transport: str) -> None:
    async def main() -> None:
        async with served_session(transport, tmp_path / "s.db", *IDENTITY) as session:
            cases: list[tuple[str, dict[str, Any], str, str | None]] = [
                (
                    "post_message",
                    {"target_mailbox": "agent://desk/claude", "payload": 1, "source_crew_id": "forged"},
                    "ToolValidationError",
                    "source_crew_id",
                ),
                ("receive_message", {"timeout_ms": 0}, "ToolValidationError", "timeout_ms"),
                (
                    "receive_message",
                    {"mailbox": "agent://other/agent", "timeout_ms": 10},
                    "ToolValidationError",
                    "mailbox",
                ),
                (
                    "post_message",
                    {"target_mailbox": "agent://nobody/here", "payload": 1},
                    "MailboxNotFoundError",
                    "target_mailbox",
                ),
                ("publish_event", {"topic": "_system.post", "payload": 1}, "ReservedTopicError", "topic"),
                ("no_such_tool", {}, "ToolValidationError", None),
            ]
            for name, arguments, error_type, field in cases:
                result = await session.call_tool(name, arguments)
                assert result.is_error is True, (name, arguments)
                error = result_of(result)["error"]
                assert (error["type"], error["field"]) == (error_type, field), error
                assert error["message"]

    run(main)


def test_a_cancelled_wait_is_withdrawn_and_takes_no_message(tmp_path: Path, transport: str) -> None:
    async def main() -> None:
        args = (*IDENTITY, "--progress-interval", "0.05")
        async with served_session(transport, tmp_path / "s.db", *args) as session:
            running = anyio.Event()

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                running.set()

            with anyio.fail_after(60):
                async with anyio.create_task_group() as group:

                    async def wait_forever() -> None:
                        await session.call_tool(
                            "receive_message", {"wait_forever": True}, progress_callback=on_progress
                        )
                        raise AssertionError("the cancelled call must not return a result")

                    group.start_soon(wait_forever)
                    # Progress proves the server runs the call; cancelling the caller makes
                    # the SDK's client send notifications/cancelled for it.
                    await running.wait()
                    group.cancel_scope.cancel()
            posted = result_of(
                await session.call_tool("post_message", {"target_mailbox": "agent://desk/claude", "payload": 1})
            )
            received = result_of(await session.call_tool("receive_message", {"timeout_ms": 5000}))
            assert received["message"]["id"] == posted["message_id"]

    run(main)


def _crew_yaml(path: Path, name: str, links: str) -> Path:
    path.write_text(f"name: {name}\nagents:\n  - id: a\n{links}")
    return path


@pytest.mark.parametrize("restrictive", [True, False])
def test_a_client_peer_is_subject_to_the_acl(tmp_path: Path, restrictive: bool, transport: str) -> None:
    report = _crew_yaml(
        tmp_path / "report.yaml", "report-crew", 'links:\n  - to: "client:studio"\n    direction: bidirectional\n'
    )
    other = _crew_yaml(tmp_path / "other.yaml", "other-crew", "links: []\n")
    args = ["--client", "studio", "--links", str(report), "--links", str(other)]
    if restrictive:
        args.append("--restrictive")

    async def main() -> None:
        async with served_session(transport, tmp_path / "s.db", *args) as session:
            granted = await session.call_tool(
                "publish_event", {"topic": "report.ready", "payload": 1, "target_crew_id": "report-crew"}
            )
            assert granted.is_error is False
            undeclared = await session.call_tool(
                "publish_event", {"topic": "x", "payload": 1, "target_crew_id": "other-crew"}
            )
            if restrictive:  # other-crew grants client:studio nothing; a client cannot grant itself
                assert undeclared.is_error is True
                assert result_of(undeclared)["error"]["type"] == "EventAclError"
                assert result_of(undeclared)["error"]["field"] == "target_crew_id"
                return
            assert undeclared.is_error is False  # permissive: an undeclared sender passes (docs/acl.md §4)
            posted = result_of(
                await session.call_tool("post_message", {"target_mailbox": "client://studio", "payload": "self"})
            )
            mine = result_of(await session.call_tool("receive_message", {"timeout_ms": 5000}))  # client://studio
            assert mine["message"]["id"] == posted["message_id"]
            assert mine["message"]["target_mailbox"] == "client://studio"

    run(main)


def test_the_command_needs_an_identity(tmp_path: Path) -> None:
    from orkeon_actors.cli.main import main

    with pytest.raises(SystemExit, match="--crew CREW --agent AGENT, or --client NAME"):
        main(["mcp", "--store", str(tmp_path / "s.db"), "--crew", "desk"])
    assert not (tmp_path / "s.db").exists()  # refused before the store is opened


def test_a_long_wait_sends_progress_when_the_client_asks_for_it(tmp_path: Path, transport: str) -> None:
    async def main() -> None:
        args = (*IDENTITY, "--progress-interval", "0.1")
        async with served_session(transport, tmp_path / "s.db", *args) as session:
            progressed = anyio.Event()
            seen: list[tuple[float, str | None]] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append((progress, message))
                progressed.set()

            got: list[dict[str, Any]] = []

            async def wait() -> None:
                result = await session.call_tool(
                    "receive_message", {"wait_forever": True}, progress_callback=on_progress
                )
                got.append(result_of(result))

            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await progressed.wait()  # the call is still running: nothing was posted yet
                await session.call_tool("post_message", {"target_mailbox": "agent://desk/claude", "payload": "now"})
            assert got[0]["message"]["payload"] == "now"
            assert seen[0] == (1.0, "receive_message still waiting")

    run(main)


@pytest.mark.parametrize("missing", ["mcp", "anyio"])
def test_without_the_extra_the_command_says_which_to_install(tmp_path: Path, missing: str) -> None:
    hide = f"import sys; sys.modules[{missing!r}] = None; "  # what an install without the extra sees
    run_cli = "from orkeon_actors.cli.main import main; main(sys.argv[1:])"
    done = subprocess.run(
        [sys.executable, "-c", hide + run_cli, "mcp", "--store", str(tmp_path / "s.db"), *IDENTITY],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert 'pip install "orkeon-actors[mcp]"' in done.stderr and "Traceback" not in done.stderr
