"""``ok.tools.mcp_tools``: an external MCP server's tools in an agent's hands, against a
small MCPServer (the SDK's high-level server) the test starts (stdio subprocess, then streamable HTTP)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewActor, CrewStatus, ScriptedModel, call, query_crew, respond, start_crew
from orkeon_actors.errors import InvalidArgumentError, McpToolError
from orkeon_actors.mcp import McpServerParams
from orkeon_actors.orchestration import Branch, Parallel, Sequential, Task
from orkeon_actors.testing import wait_until

from .helpers import drain

ROOT = Path(__file__).resolve().parents[2]
STDIO = McpServerParams(command=[sys.executable, "-m", "tests.mcp.calc_server"], cwd=str(ROOT))


def test_the_tools_of_a_stdio_server_are_listed_and_called() -> None:
    with ok.tools.mcp_tools(STDIO, prefix="calc_") as toolset:
        names = [t.name for t in toolset]
        assert names == ["calc_add", "calc_shout", "calc_divide", "calc_rendezvous"]
        add = toolset.tools[0]
        assert add.description == "Add two integers."
        assert add.input_schema["properties"].keys() == {"a", "b"}
        assert toolset.call("add", {"a": 2, "b": 3}) == {"result": 5}  # MCPServer's structured output
        with pytest.raises(McpToolError, match="cannot divide by zero") as raised:
            toolset.call("divide", {"a": 1, "b": 0})
        assert raised.value.tool == "divide"
    with pytest.raises(McpToolError, match="closed"):
        toolset.call("add", {"a": 1, "b": 1})


def test_an_agent_uses_the_external_tools_and_reads_their_errors() -> None:
    with ok.Runtime.start() as rt, ok.tools.mcp_tools(STDIO) as toolset:
        model = ScriptedModel(
            [
                call("add", {"a": 40, "b": 2}),
                call("divide", {"a": 1, "b": 0}),
                respond("done"),
            ]
        )
        agent = Agent("a", model, tools=toolset.tools, hub_tools=False)
        ref = CrewActor.start(
            rt.hub, agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]), crew_id="c1"
        )
        try:
            start_crew(ref)
            wait_until(lambda: query_crew(ref, "status") is CrewStatus.COMPLETED, what="the crew to complete")
            conversation = query_crew(ref, "snapshot").agents[0].conversation
            results = [json.loads(m.content) for m in conversation if m.role == "tool"]
            assert results[0] == {"result": 42}
            assert results[1]["error"]["type"] == "McpToolError"
            assert "cannot divide by zero" in results[1]["error"]["message"]
        finally:
            ref.stop()


def test_agents_calling_mcp_tools_park_so_their_calls_overlap() -> None:
    """Two Parallel branches call a tool that answers only when both calls are in flight:
    a tool call that held the crew's thread would leave the second never made."""
    with ok.Runtime.start() as rt, ok.tools.mcp_tools(STDIO, timeout=20) as toolset:
        agents = [
            Agent(
                name,
                ScriptedModel([call("rendezvous", {"name": "r", "parties": 2}), respond(name)]),
                tools=toolset.tools,
                hub_tools=False,
            )
            for name in ("left", "right")
        ]
        ref = CrewActor.start(
            rt.hub,
            agents=agents,
            orchestration=Parallel([Branch("l", "left", "go"), Branch("r", "right", "go")]),
            crew_id="c2",
        )
        try:
            start_crew(ref)
            wait_until(lambda: query_crew(ref, "status") is not CrewStatus.RUNNING, what="the crew to end")
            conversations = [agent.conversation for agent in query_crew(ref, "snapshot").agents]
            results = [json.loads(m.content) for c in conversations for m in c if m.role == "tool"]
            assert results == [{"result": 2}, {"result": 2}]
            assert query_crew(ref, "status") is CrewStatus.COMPLETED
        finally:
            ref.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_calc() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp.calc_server", "http", str(port)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "Uvicorn running on" in line:
                break
        else:
            pytest.fail(f"the calc server exited with code {process.wait(10)}")
        drain(process.stderr)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(20)


def test_the_tools_of_a_streamable_http_server(http_calc: str) -> None:
    with ok.tools.mcp_tools(http_calc) as toolset:
        assert [t.name for t in toolset] == ["add", "shout", "divide", "rendezvous"]
        assert toolset.call("shout", {"text": "quiet"}) == {"result": "QUIET"}


def test_an_unreachable_server_and_bad_parameters_are_typed_errors() -> None:
    with pytest.raises(McpToolError, match="cannot connect"):
        ok.tools.mcp_tools(f"http://127.0.0.1:{_free_port()}/mcp", timeout=10)
    with pytest.raises(McpToolError, match="cannot connect"):
        ok.tools.mcp_tools([sys.executable, "-c", "raise SystemExit(3)"], timeout=10)
    with pytest.raises(InvalidArgumentError):
        McpServerParams()
    with pytest.raises(InvalidArgumentError):
        McpServerParams(url="ftp://example")
