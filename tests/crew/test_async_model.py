"""An agent that asks an async (or blocking) model parks: the call runs on the runtime's
I/O loop and its answer comes back to the crew as a message, so a crew's agents call
their models concurrently."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import (
    Agent,
    BudgetLimits,
    CrewActor,
    CrewStatus,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    Tool,
    ToolCall,
    call,
    query_crew,
    respond,
    start_crew,
    wait_finished,
)
from orkeon_actors.crew.crew_actor import restore_crew
from orkeon_actors.crew.model import Usage
from orkeon_actors.errors import CrewFailedError, ModelError
from orkeon_actors.model.agent_events import AgentAnswered, ModelCallFinished, ModelCallStarted
from orkeon_actors.model.ids import AgentId
from orkeon_actors.orchestration import Branch, Consensual, Hierarchical, Parallel, Sequential, Task
from orkeon_actors.testing import wait_until

from .conftest import Crews, run_crew


class SleepyModel:
    """An async model that awaits ``asyncio.sleep(latency)`` and records its start and
    end (and the thread it ran on)."""

    model = "sleepy-1"
    provider = "test"

    def __init__(self, latency: float, answer: str | None = None) -> None:
        self.latency = latency
        self.answer = answer
        self.log: list[tuple[str, str]] = []
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        with self.lock:
            self.log.append(("start", request.agent_id))
            self.threads.add(threading.current_thread().name)
        await asyncio.sleep(self.latency)
        with self.lock:
            self.log.append(("end", request.agent_id))
        return ModelResponse(self.answer or f"done by {request.agent_id}", usage=Usage(3, 4, 0.01))


def _all_started_before_any_ended(log: list[tuple[str, str]], n: int) -> bool:
    kinds = [kind for kind, _ in log]
    return kinds[:n] == ["start"] * n and len(kinds) == 2 * n


def test_eight_parallel_branches_call_their_async_model_at_once(rt: ok.Runtime) -> None:
    model = SleepyModel(0.3)
    agents = [Agent(f"a{i}", model) for i in range(8)]
    result = run_crew(rt, agents, Parallel([Branch(f"b{i}", f"a{i}", "go") for i in range(8)]))
    assert result == "\n".join(f"done by a{i}" for i in range(8))
    assert _all_started_before_any_ended(model.log, 8)
    assert model.threads == {"orkeon-io"}  # every call on the runtime's one I/O loop thread


def test_consensual_voters_vote_at_once(rt: ok.Runtime) -> None:
    voters = SleepyModel(0.2, "approve")
    agents = [Agent(f"v{i}", voters) for i in range(4)]
    result = run_crew(rt, agents, Consensual([f"v{i}" for i in range(4)], "the plan"))
    assert result is not None and json.loads(result)["decision"] == "accepted"
    assert _all_started_before_any_ended(voters.log, 4)


def test_hierarchical_workers_work_at_once(rt: ok.Runtime) -> None:
    plan = json.dumps({"subtasks": [{"worker": f"w{i}", "task": f"part {i}"} for i in range(4)]})
    manager = Agent("m", ScriptedModel([plan, "all parts done"]))
    workers = SleepyModel(0.2)
    agents = [manager, *(Agent(f"w{i}", workers) for i in range(4))]
    assert run_crew(rt, agents, Hierarchical("m", [f"w{i}" for i in range(4)], "the goal")) == "all parts done"
    assert _all_started_before_any_ended(workers.log, 4)


def test_the_runtime_journal_records_each_call(rt: ok.Runtime) -> None:
    model = SleepyModel(0.01)
    run_crew(rt, [Agent("a", model)], Sequential([Task("go", "a")]))
    wait_until(lambda: any(isinstance(e, AgentAnswered) for e in rt.agent_events.recent()), timeout=5)
    started, finished, answered = rt.agent_events.recent()
    assert isinstance(started, ModelCallStarted) and isinstance(finished, ModelCallFinished)
    assert (started.model, started.provider, started.agent_id, started.turn) == ("sleepy-1", "test", "a", 0)
    assert started.prompt is None  # content is off by default
    assert finished.call_id == started.call_id
    assert (finished.input_tokens, finished.output_tokens, finished.cost) == (3, 4, 0.01)
    assert finished.finish_reasons == ("stop",) and finished.answer is None and finished.error is None
    assert isinstance(answered, AgentAnswered) and answered.text is None


class BlockingModel:
    """A synchronous model that does I/O: it declares ``blocking = True``."""

    blocking = True

    def __init__(self) -> None:
        self.threads: set[str] = set()
        self.barrier = threading.Barrier(2, timeout=10)

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.threads.add(threading.current_thread().name)
        self.barrier.wait()  # both calls are in flight at once, or this times out
        return ModelResponse(f"ok {request.agent_id}")


def test_a_blocking_model_runs_on_the_bounded_executor(rt: ok.Runtime) -> None:
    model = BlockingModel()
    agents = [Agent("a", model), Agent("b", model)]
    assert run_crew(rt, agents, Parallel([Branch("x", "a", "go"), Branch("y", "b", "go")])) == "ok a\nok b"
    assert all(name.startswith("orkeon-io-blocking") for name in model.threads)


class Broken:
    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise ModelError("provider down", provider="test", model="m")


def test_an_async_model_error_fails_the_crew_with_it(rt: ok.Runtime) -> None:
    with pytest.raises(CrewFailedError, match="provider down"):
        run_crew(rt, [Agent("a", Broken())], Sequential([Task("go", "a")]))


class NotAResponse:
    async def complete(self, request: ModelRequest) -> str:
        return "text"


def test_an_async_model_returning_something_else_is_a_model_error(rt: ok.Runtime) -> None:
    with pytest.raises(CrewFailedError, match="not a ModelResponse"):
        run_crew(rt, [Agent("a", NotAResponse())], Sequential([Task("go", "a")]))  # type: ignore[arg-type]


class HangingModel:
    """An async model that never answers; records that its call was cancelled."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.cancelled = threading.Semaphore(0)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.started.release()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.release()
            raise
        raise AssertionError("unreachable")


def test_a_wall_time_budget_ends_the_call_in_flight(crews: Crews) -> None:
    model = HangingModel()
    agent = Agent("a", model, budget=BudgetLimits(max_wall_time=30))
    ref = crews.start(agents=[agent], orchestration=Sequential([Task("go", "a")]), crew_id="c1")
    assert model.started.acquire(timeout=10)
    assert query_crew(ref, "status") is CrewStatus.RUNNING  # a call in flight: the crew is busy, never asleep
    crews.clock.advance(30)
    assert crews.settle(ref, CrewStatus.FAILED) is CrewStatus.FAILED
    failure = query_crew(ref, "summary")[2]
    assert failure.error_type == "BudgetExhaustedError" and "wall-time" in failure.message
    assert model.cancelled.acquire(timeout=10)


def test_stopping_a_crew_cancels_its_calls(crews: Crews) -> None:
    model = HangingModel()
    ref = crews.start(agents=[Agent("a", model)], orchestration=Sequential([Task("go", "a")]))
    assert model.started.acquire(timeout=10)
    ref.stop()
    assert model.cancelled.acquire(timeout=10)


def test_a_met_join_cancels_the_other_branches_calls(crews: Crews) -> None:
    hanging = HangingModel()
    agents = [Agent("fast", ScriptedModel(["first"])), Agent("slow", hanging)]
    orchestration = Parallel([Branch("s", "slow", "go"), Branch("f", "fast", "go")], join="any")
    ref = crews.start(agents=agents, orchestration=orchestration)
    assert crews.settle(ref, CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    assert hanging.cancelled.acquire(timeout=10)


def _most_at_once(log: list[tuple[str, str]]) -> int:
    running = most = 0
    for kind, _ in log:
        running += 1 if kind == "start" else -1
        most = max(most, running)
    return most


def test_a_crew_bound_queues_its_calls_in_order(rt: ok.Runtime) -> None:
    model = SleepyModel(0.3)
    agents = [Agent(f"a{i}", model) for i in range(6)]
    ref = CrewActor.start(
        rt.hub,
        agents=agents,
        orchestration=Parallel([Branch(f"b{i}", f"a{i}", "go") for i in range(6)]),
        max_concurrent_calls=2,
    )
    try:
        start_crew(ref)
        assert wait_finished(ref, timeout=30).result == "\n".join(f"done by a{i}" for i in range(6))
    finally:
        ref.stop()
    assert _most_at_once(model.log) == 2  # bounded, none dropped
    assert [agent for kind, agent in model.log if kind == "start"] == [f"a{i}" for i in range(6)]


def test_a_runtime_bound_holds_across_crews(rt: ok.Runtime) -> None:
    rt.agent_io.max_concurrent_calls = 3
    model = SleepyModel(0.3)
    refs = []
    for _ in range(2):
        agents = [Agent(f"a{i}", model) for i in range(4)]
        ref = CrewActor.start(
            rt.hub, agents=agents, orchestration=Parallel([Branch(f"b{i}", f"a{i}", "go") for i in range(4)])
        )
        start_crew(ref)
        refs.append(ref)
    for ref in refs:
        wait_finished(ref, timeout=30)
        ref.stop()
    assert len(model.log) == 16 and _most_at_once(model.log) == 3


class Watching(CrewActor):
    """A crew subclass observing its agents' model and tool calls."""

    seen: ClassVar[list[str]] = []

    def on_model_call(self, agent_id: AgentId, request: ModelRequest) -> None:
        self.seen.append(f"ask {agent_id} turn {request.turn}")

    def on_model_answer(self, agent_id: AgentId, request: ModelRequest, outcome: ModelResponse | BaseException) -> None:
        assert isinstance(outcome, ModelResponse)
        self.seen.append(f"answer {agent_id} turn {request.turn}: {outcome.text or outcome.tool_calls[0].name}")

    def on_tool_result(self, agent_id: AgentId, call: ToolCall, result: Mapping[str, Any]) -> None:
        self.seen.append(f"tool {agent_id} {call.name} -> {dict(result)}")


def test_a_crew_subclass_sees_each_model_call_and_tool_call(rt: ok.Runtime) -> None:
    class ToolThenAnswer(SleepyModel):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            await asyncio.sleep(0.01)
            if request.turn == 0:
                return call("add", {"a": 1, "b": 2})
            return respond(f"sum {request.last_tool_result()['result']}")

    add = Tool("add", "adds", lambda args: args["a"] + args["b"])
    Watching.seen = []
    ref = Watching.start(
        rt.hub, agents=[Agent("a", ToolThenAnswer(0), tools=[add])], orchestration=Sequential([Task("go", "a")])
    )
    try:
        start_crew(ref)
        assert wait_finished(ref, timeout=30).result == "sum 3"
    finally:
        ref.stop()
    assert Watching.seen == [
        "ask a turn 0",
        "answer a turn 0: add",
        "tool a add -> {'result': 3}",
        "ask a turn 1",
        "answer a turn 1: sum 3",
    ]


def test_a_crew_restored_while_its_agent_was_asking_asks_again(rt: ok.Runtime) -> None:
    hanging = HangingModel()
    agents = [Agent("a", hanging, instructions="be brief")]
    ref = CrewActor.start(rt.hub, agents=agents, orchestration=Sequential([Task("go", "a")]), crew_id="c1")
    start_crew(ref)
    assert hanging.started.acquire(timeout=10)
    snapshot = query_crew(ref, "snapshot")
    assert snapshot.agents[0].status.value == "running" and snapshot.agents[0].conversation[-1].role == "user"
    ref.stop()
    answering = SleepyModel(0.01, "answered after the restore")
    again = CrewActor.start(
        rt.hub,
        agents=[Agent("a", answering, instructions="be brief")],
        orchestration=Sequential([Task("go", "a")]),
        crew_id="c1",
    )
    try:
        restore_crew(again, snapshot)
        assert wait_finished(again, timeout=30).result == "answered after the restore"
    finally:
        again.stop()
    assert answering.log == [("start", "a"), ("end", "a")]  # asked once more: at least once


def test_an_async_user_tool_parks_its_agent_and_the_others_go_on(rt: ok.Runtime) -> None:
    log: list[str] = []

    async def fetch(arguments: Mapping[str, Any]) -> dict[str, Any]:
        log.append(f"fetch {arguments['url']} start")
        await asyncio.sleep(0.2)
        log.append(f"fetch {arguments['url']} end")
        if arguments["url"] == "bad":
            raise ValueError("no such page")
        return {"page": arguments["url"].upper()}

    def agent(agent_id: str, url: str) -> Agent:
        def step(request: ModelRequest) -> ModelResponse:
            if request.turn == 0:
                return call("fetch", {"url": url})
            return respond(json.dumps(request.last_tool_result(), sort_keys=True))

        return Agent(agent_id, ScriptedModel(policy=step), tools=[Tool("fetch", "fetches a page", fetch)])

    agents = [agent("a", "x"), agent("b", "bad")]
    result = run_crew(rt, agents, Parallel([Branch("one", "a", "go"), Branch("two", "b", "go")]))
    assert result is not None
    first, second = result.split("\n")
    assert json.loads(first) == {"page": "X"}
    assert json.loads(second)["error"]["message"] == "no such page"  # a tool's error is a result the model reads
    assert log[:2] == ["fetch x start", "fetch bad start"]  # both in flight at once
