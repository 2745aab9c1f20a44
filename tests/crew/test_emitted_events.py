"""What a crew records in its runtime's agent event journal: each model call and tool
call started and finished, each answer; content only when capture is on."""

from __future__ import annotations

import json

from orkeon_actors.crew import (
    Agent,
    BudgetLimits,
    CrewStatus,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    Tool,
    call,
    respond,
)
from orkeon_actors.errors import HubStoppedError, ModelError
from orkeon_actors.model.agent_events import (
    AgentAnswered,
    AgentEvent,
    AgentFailed,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from orkeon_actors.orchestration import Sequential, Task

from .conftest import Crews


def _kinds(events: tuple[AgentEvent, ...]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_turn_with_a_tool_call_is_recorded_without_content_by_default(crews: Crews) -> None:
    echo = Tool("echo", "echo", lambda args: {"said": args["text"]})
    agent = Agent(
        "a", ScriptedModel([call("echo", {"text": "hi"}, tokens=5, cost=0.5), respond("bye", tokens=7)]), tools=[echo]
    )
    ref = crews.start(
        agents=[
            agent,
        ],
        orchestration=Sequential([Task("go", "a")]),
        crew_id="c1",
    )
    assert crews.settle(ref, CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    events = crews.runtime.agent_events.recent()
    assert _kinds(events) == [
        "ModelCallStarted",
        "ModelCallFinished",
        "ToolCallStarted",
        "ToolCallFinished",
        "ModelCallStarted",
        "ModelCallFinished",
        "AgentAnswered",
    ]
    first, finished, tool_start, tool_end, _, last, answer = events
    assert isinstance(first, ModelCallStarted) and isinstance(finished, ModelCallFinished)
    assert (first.crew_id, first.agent_id, first.model, first.provider) == ("c1", "a", "scripted", "scripted")
    assert finished.finish_reasons == ("tool_calls",) and finished.tool_calls == ("echo",)
    assert (finished.input_tokens, finished.cost) == (5, 0.5)
    assert isinstance(tool_start, ToolCallStarted) and isinstance(tool_end, ToolCallFinished)
    assert tool_start.name == tool_end.name == "echo" and tool_start.call_id == tool_end.call_id
    assert tool_start.arguments is None and tool_end.result is None and tool_end.error is None
    assert isinstance(last, ModelCallFinished) and last.finish_reasons == ("stop",) and last.turn == 1
    assert isinstance(answer, AgentAnswered) and answer.text is None
    assert [e.seq for e in events] == sorted(e.seq for e in events)


def test_content_is_recorded_when_capture_is_on(crews: Crews) -> None:
    crews.runtime.agent_events.capture_content = True
    boom = Tool("boom", "fails", lambda args: 1 / 0)
    agent = Agent("a", ScriptedModel([call("boom", {"x": 1}), respond("done")]), tools=[boom], instructions="be brief")
    ref = crews.start(agents=[agent], orchestration=Sequential([Task("go", "a")]), crew_id="c1")
    crews.settle(ref, CrewStatus.COMPLETED)
    first, _, tool_start, tool_end, _, _, answer = crews.runtime.agent_events.recent()
    assert isinstance(first, ModelCallStarted) and first.prompt is not None
    system, user = json.loads(first.prompt)
    assert (system["role"], system["content"], user["role"]) == ("system", "be brief", "user")
    assert isinstance(tool_start, ToolCallStarted) and json.loads(tool_start.arguments or "") == {"x": 1}
    assert isinstance(tool_end, ToolCallFinished) and tool_end.error == "ZeroDivisionError: division by zero"
    assert tool_end.result is not None and "ZeroDivisionError" in tool_end.result
    assert isinstance(answer, AgentAnswered) and answer.text == "done"


def test_a_parked_hub_wait_finishes_when_its_message_comes(crews: Crews) -> None:
    agent = Agent("a", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("got it")]))
    ref = crews.start(agents=[agent], orchestration=Sequential([Task("go", "a")]), crew_id="c1")
    assert crews.settle(ref) is CrewStatus.WAITING
    assert _kinds(crews.runtime.agent_events.recent())[-1] == "ToolCallStarted"
    crews.clock.advance(3)
    crews.runtime.hub.bind("other", "x").post("agent://c1/a", {"hello": 1})
    crews.settle(ref, CrewStatus.COMPLETED)
    events = crews.runtime.agent_events.recent()
    end = next(e for e in events if isinstance(e, ToolCallFinished))
    assert end.name == "receive_message" and end.duration_s == 3.0


class _Raising:
    """A model whose every call raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def complete(self, request: ModelRequest) -> ModelResponse:
        raise self.error


def _failure(crews: Crews, agent: Agent, status: CrewStatus = CrewStatus.FAILED) -> AgentFailed:
    ref = crews.start(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]), crew_id="c1")
    assert crews.settle(ref, status) is status
    failed = [e for e in crews.runtime.agent_events.recent() if isinstance(e, AgentFailed)]
    assert len(failed) == 1, _kinds(crews.runtime.agent_events.recent())
    assert (failed[0].crew_id, failed[0].agent_id) == ("c1", str(agent.agent_id))
    return failed[0]


def test_a_model_that_raises_ends_the_task_with_a_model_error_event(crews: Crews) -> None:
    error = ModelError("503 from the provider", provider="openai", model="gpt-x")
    failed = _failure(crews, Agent("a", _Raising(error)))
    assert (failed.reason, failed.error, failed.tool) == ("model_error", "ModelError: 503 from the provider", None)
    assert _kinds(crews.runtime.agent_events.recent())[-2:] == ["ModelCallFinished", "AgentFailed"]


def test_any_exception_of_the_model_call_is_a_model_error(crews: Crews) -> None:
    failed = _failure(crews, Agent("a", _Raising(RuntimeError("my model broke"))))
    assert (failed.reason, failed.error) == ("model_error", "RuntimeError: my model broke")


def test_an_exhausted_budget_is_its_reason(crews: Crews) -> None:
    model = ScriptedModel([call("receive_message", {"wait_forever": False, "timeout_ms": 10}, tokens=50)] * 3)
    failed = _failure(crews, Agent("a", model, budget=BudgetLimits(max_tokens=60)))
    assert failed.reason == "budget_exhausted" and failed.error.startswith("BudgetExhaustedError")


def test_a_deadline_passing_during_a_wait_is_a_deadline(crews: Crews) -> None:
    model = ScriptedModel([call("receive_message", {"wait_forever": True}), respond("never")])
    agent = Agent("a", model, budget=BudgetLimits(max_wall_time=5))
    ref = crews.start(agents=[agent], orchestration=Sequential([Task("go", "a")]), crew_id="c1")
    assert crews.settle(ref) is CrewStatus.WAITING
    crews.clock.advance(6)
    assert crews.settle(ref, CrewStatus.FAILED) is CrewStatus.FAILED
    [failed] = [e for e in crews.runtime.agent_events.recent() if isinstance(e, AgentFailed)]
    assert (failed.reason, failed.tool) == ("deadline", "receive_message")
    assert failed.at == crews.clock.now()


def test_an_error_that_ends_the_agent_inside_a_tool_is_a_tool_error(crews: Crews) -> None:
    def gone(args: object) -> object:
        raise HubStoppedError("the hub stopped under the tool")

    agent = Agent("a", ScriptedModel([call("fetch", {}), respond("never")]), tools=[Tool("fetch", "f", gone)])
    failed = _failure(crews, agent)
    assert (failed.reason, failed.tool) == ("tool_error", "fetch")
    assert failed.error == "HubStoppedError: the hub stopped under the tool"


def test_a_crew_stopped_while_its_agent_works_records_it_cancelled(crews: Crews) -> None:
    agent = Agent("a", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("never")]))
    ref = crews.start(agents=[agent], orchestration=Sequential([Task("go", "a")]), crew_id="c1")
    assert crews.settle(ref) is CrewStatus.WAITING
    ref.stop()
    [failed] = [e for e in crews.runtime.agent_events.recent() if isinstance(e, AgentFailed)]
    assert (failed.reason, failed.tool) == ("cancelled", "receive_message")
    assert failed.error == "CancelledError: the crew was stopped while the agent worked"
