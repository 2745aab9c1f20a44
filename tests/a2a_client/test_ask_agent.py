"""The ``ask_agent`` tool against a remote agent started with ``a2a-sdk`` (issue #33,
"Calling A2A agents from a crew"): round trip, streaming, input-required, failure,
ACL both ways, cancellation and timeout."""

from __future__ import annotations

from typing import Any

import orkeon_actors as ok
from orkeon_actors.a2a.client import RemoteAgent
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink
from orkeon_actors.crew import Agent, CrewActor, ModelRequest, ModelResponse, ScriptedModel, call, respond, start_crew
from orkeon_actors.orchestration import Sequential, Task
from tests.a2a_client.conftest import Setup, dumps
from tests.a2a_client.remote_agent import RemoteAgentServer

WEATHER = [CrewLink.a2a("weather", "bidirectional")]


def ask(message: str, **more: Any) -> ModelResponse:
    return call("ask_agent", {"agent": "weather", "message": message, **more})


def once(message: str) -> Any:
    """An agent that asks once and answers with the tool's result."""
    return lambda request, results: ask(message) if request.turn == 0 else respond(dumps(results[-1]))


def test_the_tool_describes_the_card_skills(setup: Setup) -> None:
    assert setup.rt.a2a_agents is not None
    tool = setup.rt.a2a_agents.tool()
    assert tool.name == "ask_agent"
    assert "weather: Weather forecasts for European cities" in tool.description
    assert "skill Forecast: Tomorrow's forecast for a city (e.g. forecast for Paris)" in tool.description
    assert tool.input_schema["properties"]["agent"]["enum"] == ["weather"]


def test_ask_agent_round_trip(setup: Setup) -> None:
    outcome, results = setup.run_crew("planner-crew", WEATHER, once("hello Paris"))
    [result] = results
    assert result["state"] == "completed" and result["answer"] == "hi: hello Paris"
    assert result["artifacts"] == [{"name": "greeting", "text": "hi: hello Paris"}]
    assert result["agent"] == "weather" and result["task_id"]
    assert outcome.result == dumps(result)


def test_a_streaming_task_reaches_the_agent_as_events_in_order(setup: Setup) -> None:
    _, [result] = setup.run_crew("stream-crew", WEATHER, once("stream"))
    assert [(e["kind"], e.get("state"), e["text"]) for e in result["events"]] == [
        ("status", "working", "step 1"),
        ("status", "working", "step 2"),
        ("artifact", None, "part A"),
        ("artifact", None, " part B"),
        ("status", "completed", ""),
    ]
    assert result["answer"] == "part A part B"  # the appended chunk joins its artifact


def test_input_required_reaches_the_agent_and_its_answer_continues_the_task(setup: Setup) -> None:
    def steps(request: ModelRequest, results: list[Any]) -> ModelResponse:
        if request.turn == 0:
            return ask("ask")
        if request.turn == 1:
            return ask("Lyon", task_id=results[-1]["task_id"])
        return respond("done")

    outcome, [question, answer] = setup.run_crew("ask-crew", WEATHER, steps)
    assert question["state"] == "input-required" and question["question"] == "which city?"
    assert f"task_id={question['task_id']!r}" in question["next"]
    assert answer["state"] == "completed" and answer["answer"] == "forecast for Lyon"
    assert answer["task_id"] == question["task_id"]  # the same remote task
    assert outcome.result == "done"


def test_a_remote_failure_is_a_typed_error_result(setup: Setup) -> None:
    _, [result] = setup.run_crew("fail-crew", WEATHER, once("fail"))
    error = result["error"]
    assert error["type"] == "RemoteAgentFailedError"
    assert "ended task" in error["message"] and "as failed: no forecast today" in error["message"]
    assert "ask another agent" in error["message"]  # what to do next


def test_continuing_a_task_that_does_not_exist_is_a_typed_error_result(setup: Setup) -> None:
    _, [result] = setup.run_crew("bad-task-crew", WEATHER, once_with_task("no-such-task"))
    assert result["error"]["type"] == "RemoteAgentFailedError"
    assert "no-such-task" in result["error"]["message"]


def once_with_task(task_id: str) -> Any:
    return lambda request, results: ask("Lyon", task_id=task_id) if request.turn == 0 else respond(dumps(results[-1]))


def test_bad_arguments_are_a_validation_error_result(setup: Setup) -> None:
    def steps(request: ModelRequest, results: list[Any]) -> ModelResponse:
        if request.turn == 0:
            return call("ask_agent", {"agent": "nobody", "message": "hi"})
        return respond(dumps(results[-1]))

    _, [result] = setup.run_crew("bad-args-crew", WEATHER, steps)
    assert result["error"]["type"] == "ToolValidationError" and result["error"]["field"] == "agent"


def test_a_crew_not_linked_to_the_agent_cannot_call_it(setup: Setup) -> None:
    before = setup.remote.executor.received
    _, [undeclared] = setup.run_crew("no-links-crew", None, once("hello"))
    _, [other] = setup.run_crew("other-links-crew", [CrewLink("no-links-crew", "outbound")], once("hello"))
    for result in (undeclared, other):
        assert result["error"]["type"] == "EventAclError"
        assert "{to: a2a:weather, direction: bidirectional}" in result["error"]["message"]  # the fix
    assert "a2a-unlinked" in undeclared["error"]["message"]
    assert setup.remote.executor.received == before  # nothing reached the agent


def test_an_outbound_only_link_refuses_the_call_whose_answer_could_not_come_back(setup: Setup) -> None:
    before = setup.remote.executor.received
    _, [result] = setup.run_crew("outbound-crew", [CrewLink.a2a("weather", "outbound")], once("hello"))
    assert result["error"]["type"] == "EventAclError"
    assert "outbound only: make it bidirectional" in result["error"]["message"]
    assert setup.remote.executor.received == before


def test_stopping_the_crew_cancels_the_remote_task(setup: Setup) -> None:
    executor = setup.remote.executor
    executor.started_slow.clear()
    executor.cancelled.clear()
    assert setup.rt.a2a_agents is not None
    agent = Agent("planner", ScriptedModel([ask("slow"), respond("never")]), tools=[setup.rt.a2a_agents.tool()])
    ref = CrewActor.start(
        setup.rt.hub,
        name="slow-crew",
        agents=[agent],
        orchestration=Sequential([Task("plan", "planner")]),
        links=WEATHER,
        acl=setup.registry,
    )
    start_crew(ref)
    assert executor.started_slow.wait(10), "the remote agent never started the task"
    io_thread = setup.rt.agent_io.loop.thread
    assert io_thread is not None
    ref.stop()
    assert executor.cancelled.wait(10), "tasks/cancel never reached the remote agent"
    assert io_thread.is_alive()  # the runtime goes on


def test_a_call_past_its_timeout_is_cancelled_and_fails_typed(remote: RemoteAgentServer) -> None:
    remote.executor.started_slow.clear()
    remote.executor.cancelled.clear()
    registry = AclRegistry()
    agents = {"weather": RemoteAgent("weather", remote.url, timeout=0.5)}
    with ok.Runtime.start(middleware=[AclMiddleware(registry)], a2a_agents=agents) as rt:
        setup = Setup(rt, registry, remote)
        _, [result] = setup.run_crew("timeout-crew", WEATHER, once("slow"))
    assert result["error"]["type"] == "RemoteAgentTimeoutError"
    assert "did not answer within 0.5s" in result["error"]["message"]
    assert remote.executor.cancelled.wait(10), "the timed-out task was not cancelled"
