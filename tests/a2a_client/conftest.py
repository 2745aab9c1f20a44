"""Fixtures of the A2A calling tests: one remote agent per module (a bare ``a2a-sdk``
server on loopback), a runtime per test with an ACL stage and that agent configured as
``weather``, and a helper running a one-agent crew."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink
from orkeon_actors.crew import (
    Agent,
    CrewActor,
    CrewOutcome,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    start_crew,
    wait_finished,
)
from orkeon_actors.orchestration import Sequential, Task
from tests.a2a_client.remote_agent import RemoteAgentServer, serve_remote_agent


@pytest.fixture(scope="module")
def remote() -> Iterator[RemoteAgentServer]:
    with serve_remote_agent() as server:
        yield server


class Setup:
    def __init__(self, rt: ok.Runtime, registry: AclRegistry, remote: RemoteAgentServer) -> None:
        self.rt = rt
        self.registry = registry
        self.remote = remote

    def run_crew(
        self,
        name: str,
        links: Sequence[CrewLink] | None,
        steps: Callable[[ModelRequest, list[Any]], ModelResponse],
        *,
        timeout: float = 30,
    ) -> tuple[CrewOutcome, list[Any]]:
        """Run the crew ``name`` whose one agent ``planner`` has the ``ask_agent`` tool and
        answers with ``steps(request, results so far)``; its outcome and the tool results."""
        results: list[Any] = []

        def policy(request: ModelRequest) -> ModelResponse:
            if request.turn > 0:
                results.append(request.last_tool_result())
            return steps(request, results)

        assert self.rt.a2a_agents is not None
        agent = Agent("planner", ScriptedModel(policy=policy), tools=[self.rt.a2a_agents.tool()])
        ref = CrewActor.start(
            self.rt.hub,
            name=name,
            agents=[agent],
            orchestration=Sequential([Task("plan", "planner")]),
            links=links,
            acl=self.registry,
        )
        try:
            start_crew(ref)
            return wait_finished(ref, timeout=timeout), results
        finally:
            ref.stop()


@pytest.fixture
def setup(remote: RemoteAgentServer) -> Iterator[Setup]:
    registry = AclRegistry()
    with ok.Runtime.start(middleware=[AclMiddleware(registry)], a2a_agents={"weather": remote.url}) as rt:
        yield Setup(rt, registry, remote)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
