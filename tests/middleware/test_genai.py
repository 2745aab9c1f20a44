"""GenAI spans and metrics from a runtime's agent events: the events are recorded into the
runtime's journal here exactly as the agent loop records them, and the spans are read
from the SDK's in-memory exporter (OpenTelemetry semantic conventions, gen-ai)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, StatusCode

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewActor, ScriptedModel, call, respond, start_crew, wait_finished
from orkeon_actors.middleware import TelemetryMiddleware
from orkeon_actors.middleware.genai import (
    CAPTURE_CONTENT_ENV,
    INSTRUMENTATION_NAME,
    input_messages,
    observe_agents,
    output_messages,
)
from orkeon_actors.model.agent_events import (
    AgentAnswered,
    AgentEventJournal,
    AgentFailed,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from orkeon_actors.orchestration import Sequential, Task
from tests.middleware.conftest import Metrics, StartRuntime, Tracing

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000) * 1_000


def _model_call(
    journal: AgentEventJournal, agent: str, at: datetime, duration: float, *, crew: str = "crew-a", **finished: Any
) -> None:
    call_id = journal.next_call_id()
    common = {"call_id": call_id, "crew_id": crew, "agent_id": agent, "turn": 0, "model": "gpt-4o-mini"}
    journal.record(ModelCallStarted(**common, provider="openai", started_at=at, prompt=finished.pop("prompt", None)))
    journal.record(ModelCallFinished(**common, provider="openai", started_at=at, duration_s=duration, **finished))


def _tool_call(journal: AgentEventJournal, agent: str, at: datetime, duration: float, **finished: Any) -> None:
    call_id = journal.next_call_id()
    common = {
        "call_id": call_id,
        "crew_id": "crew-a",
        "agent_id": agent,
        "tool_call_id": "tc-1",
        "name": "post_message",
    }
    journal.record(ToolCallStarted(**common, started_at=at, arguments=finished.pop("arguments", None)))
    journal.record(ToolCallFinished(**common, started_at=at, duration_s=duration, **finished))


@pytest.fixture
def runtime(start_runtime: StartRuntime) -> ok.Runtime:
    return start_runtime()


@pytest.fixture(autouse=True)
def _no_content_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    yield


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_turn_is_a_trace_of_chat_and_tool_spans_at_the_events_times(
    runtime: ok.Runtime, tracing: Tracing, metrics: Metrics
) -> None:
    journal = runtime.agent_events
    with ok.observe_agents(runtime, tracer_provider=tracing.provider, meter_provider=metrics.provider) as observer:
        _model_call(
            journal,
            "writer",
            T0,
            1.5,
            response_model="gpt-4o-mini-2024-07-18",
            input_tokens=120,
            output_tokens=30,
            cost=0.002,
            finish_reasons=("tool_calls",),
            tool_calls=("post_message",),
        )
        _tool_call(journal, "writer", T0 + timedelta(seconds=1.5), 0.25)
        _model_call(journal, "writer", T0 + timedelta(seconds=2), 1.0, input_tokens=200, output_tokens=5)
        journal.record(AgentAnswered(crew_id="crew-a", agent_id="writer", at=T0 + timedelta(seconds=3.5)))
        assert observer.flush(timeout=30)
        assert {s.name for s in tracing.spans()} == {
            "chat gpt-4o-mini",
            "execute_tool post_message",
            "invoke_agent writer",
        }
    workflow = tracing.one("invoke_workflow crew-a")
    turn = tracing.one("invoke_agent writer")
    first, second = sorted(tracing.spans("chat gpt-4o-mini"), key=lambda s: s.start_time or 0)
    tool = tracing.one("execute_tool post_message")

    assert first.instrumentation_scope is not None and first.instrumentation_scope.name == INSTRUMENTATION_NAME
    assert workflow.parent is None
    assert turn.parent is not None and turn.parent.span_id == workflow.context.span_id
    for child in (first, second, tool):
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == workflow.context.trace_id
    assert (first.kind, tool.kind, turn.kind) == (SpanKind.CLIENT, SpanKind.INTERNAL, SpanKind.INTERNAL)
    assert (first.start_time, first.end_time) == (_ns(T0), _ns(T0) + 1_500_000_000)
    assert (tool.start_time, tool.end_time) == (_ns(T0) + 1_500_000_000, _ns(T0) + 1_750_000_000)
    assert (turn.start_time, turn.end_time) == (_ns(T0), _ns(T0) + 3_500_000_000)
    assert workflow.end_time == _ns(T0) + 3_500_000_000
    assert _attributes(first) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.agent.id": "writer",
        "gen_ai.agent.name": "writer",
        "orkeon.crew.id": "crew-a",
    }
    assert first.status.status_code is StatusCode.UNSET
    assert _attributes(tool)["gen_ai.tool.name"] == "post_message"
    assert _attributes(tool)["gen_ai.tool.call.id"] == "tc-1"
    assert _attributes(turn)["gen_ai.operation.name"] == "invoke_agent"

    tokens = metrics.values("gen_ai.client.token.usage")
    base = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini"}
    assert tokens[frozenset({**base, "gen_ai.token.type": "input"}.items())] == 1
    assert (
        tokens[
            frozenset({**base, "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.token.type": "input"}.items())
        ]
        == 1
    )
    [duration_of_second] = [
        p
        for p in metrics.points("gen_ai.client.operation.duration")
        if "gen_ai.response.model" not in (p.attributes or {})
    ]
    assert duration_of_second.sum == pytest.approx(1.0)
    input_points = [
        p for p in metrics.points("gen_ai.client.token.usage") if p.attributes["gen_ai.token.type"] == "input"
    ]
    assert sorted(p.sum for p in input_points) == [120, 200]


def test_a_failed_call_has_error_status_and_type(runtime: ok.Runtime, tracing: Tracing, metrics: Metrics) -> None:
    with observe_agents(runtime, tracer_provider=tracing.provider, meter_provider=metrics.provider):
        _model_call(runtime.agent_events, "a", T0, 0.5, error="RateLimitError: 429 too many requests")
        _tool_call(runtime.agent_events, "a", T0 + timedelta(seconds=1), 0.1, error="ToolError: no such mailbox")
    chat, tool = tracing.one("chat gpt-4o-mini"), tracing.one("execute_tool post_message")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.status.description == "RateLimitError: 429 too many requests"
    assert _attributes(chat)["error.type"] == "RateLimitError"
    assert tool.status.status_code is StatusCode.ERROR and _attributes(tool)["error.type"] == "ToolError"
    [point] = metrics.points("gen_ai.client.operation.duration")
    assert point.attributes["error.type"] == "RateLimitError"


def test_calls_before_the_observer_attached_become_spans(runtime: ok.Runtime, tracing: Tracing) -> None:
    _model_call(runtime.agent_events, "early", T0, 2.0)
    with observe_agents(runtime, tracer_provider=tracing.provider):
        pass
    assert tracing.one("chat gpt-4o-mini").start_time == _ns(T0)
    assert tracing.one("invoke_agent early").end_time == _ns(T0) + 2_000_000_000


def test_each_crew_is_its_own_trace_and_agents_turns_interleave(runtime: ok.Runtime, tracing: Tracing) -> None:
    journal = runtime.agent_events
    with observe_agents(runtime, tracer_provider=tracing.provider):
        _model_call(journal, "a", T0, 1.0, crew="crew-a")
        _model_call(journal, "b", T0, 1.0, crew="crew-b")
        _model_call(journal, "c", T0, 1.0, crew="crew-a")
    by_agent = {_attributes(s)["gen_ai.agent.id"]: s for s in tracing.spans("chat gpt-4o-mini")}
    assert by_agent["a"].context.trace_id == by_agent["c"].context.trace_id != by_agent["b"].context.trace_id
    assert by_agent["a"].parent != by_agent["c"].parent  # each agent its own turn span


def test_content_is_captured_only_when_opted_in(
    runtime: ok.Runtime, tracing: Tracing, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = runtime.agent_events
    journal.capture_content = True  # another observer (the Studio) asked for content
    with observe_agents(runtime, tracer_provider=tracing.provider):
        _model_call(journal, "a", T0, 1.0, prompt='[{"role":"user","content":"hi"}]', answer="hello")
    assert not any(
        k.startswith(("gen_ai.input", "gen_ai.output")) for k in _attributes(tracing.one("chat gpt-4o-mini"))
    )

    journal.capture_content = False
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    with observe_agents(AgentEventJournal(), tracer_provider=tracing.provider) as off:
        assert off.capture_content
    with observe_agents(runtime, tracer_provider=tracing.provider) as observer:
        assert journal.capture_content, "opting in tells the agent loop to fill the content fields"
        _model_call(
            journal, "b", T0, 1.0, prompt='[{"role":"user","content":"hi"}]', answer="hello", finish_reasons=("stop",)
        )
        _tool_call(journal, "b", T0, 0.1, arguments='{"to":"x"}', result='{"ok":true}')
    assert observer.capture_content
    chats = [s for s in tracing.spans("chat gpt-4o-mini") if _attributes(s)["gen_ai.agent.id"] == "b"]
    [chat] = chats
    assert json.loads(_attributes(chat)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    ]
    assert json.loads(_attributes(chat)["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "hello"}], "finish_reason": "stop"}
    ]
    [tool_span] = [s for s in tracing.spans("execute_tool post_message") if _attributes(s)["gen_ai.agent.id"] == "b"]
    tool = _attributes(tool_span)
    assert (tool["gen_ai.tool.call.arguments"], tool["gen_ai.tool.call.result"]) == ('{"to":"x"}', '{"ok":true}')


def test_a_closed_observer_makes_no_more_spans(runtime: ok.Runtime, tracing: Tracing) -> None:
    observer = observe_agents(runtime, tracer_provider=tracing.provider)
    observer.close()
    _model_call(runtime.agent_events, "a", T0, 1.0)
    assert tracing.spans() == []
    observer.close()


def test_open_crews_are_bounded(tracing: Tracing) -> None:
    journal = AgentEventJournal()
    from orkeon_actors.middleware.genai import AgentTelemetry

    with pytest.raises(ok.errors.InvalidArgumentError, match="open_crews"):
        AgentTelemetry(journal, open_crews=0)
    with AgentTelemetry(journal, tracing.provider, open_crews=2) as observer:
        for crew in ("c1", "c2", "c3"):
            _model_call(journal, "a", T0, 1.0, crew=crew)
        assert observer.flush(timeout=30)
        assert [s.name for s in tracing.spans() if s.name.startswith("invoke_workflow")] == ["invoke_workflow c1"]


def test_recording_an_event_never_waits_on_the_spans(runtime: ok.Runtime) -> None:
    release = threading.Event()
    ended_on: list[str] = []

    class SlowProcessor(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            ended_on.append(threading.current_thread().name)
            release.wait(30)

    provider = TracerProvider()
    provider.add_span_processor(SlowProcessor())
    with observe_agents(runtime, tracer_provider=provider) as observer:
        _model_call(runtime.agent_events, "a", T0, 1.0)  # returns while the chat span is stuck in on_end
        assert not release.is_set()
        release.set()
        assert observer.flush(timeout=30)
        assert ended_on == ["orkeon-genai-spans"]  # the chat span, built off the recording thread
    provider.shutdown()


def test_a_failed_agent_ends_its_turn_with_error_when_it_fails(runtime: ok.Runtime, tracing: Tracing) -> None:
    journal = runtime.agent_events
    with observe_agents(runtime, tracer_provider=tracing.provider) as observer:
        _model_call(journal, "a", T0, 1.0, error="ModelError: 503")
        failed_at = T0 + timedelta(seconds=1)
        journal.record(
            AgentFailed(crew_id="crew-a", agent_id="a", at=failed_at, reason="model_error", error="ModelError: 503")
        )
        assert observer.flush(timeout=30)
        turn = tracing.one("invoke_agent a")  # ended now, not when the observer closes
        assert tracing.spans("invoke_workflow crew-a") == []
    assert turn.end_time == _ns(failed_at)
    assert turn.status.status_code is StatusCode.ERROR and turn.status.description == "ModelError: 503"
    assert _attributes(turn)["error.type"] == "ModelError"
    assert _attributes(turn)["orkeon.agent.failure_reason"] == "model_error"


def _poster(crew: str) -> Agent:
    model = ScriptedModel(
        [call("post_message", {"target_mailbox": "agent://sink/s", "payload": {"from": crew}}), respond("posted")]
    )
    return Agent("writer", model)


def test_a_crews_hub_messages_and_its_model_and_tool_calls_are_one_trace(
    start_runtime: StartRuntime, tracing: Tracing
) -> None:
    rt = start_runtime(middleware=[TelemetryMiddleware(tracing.provider)])
    sink = rt.hub.register_mailbox(ok.MailboxAddress.parse("agent://sink/s"))
    with observe_agents(rt, tracer_provider=tracing.provider):
        refs = [
            CrewActor.start(rt.hub, agents=[_poster(c)], orchestration=Sequential([Task("go", "writer")]), crew_id=c)
            for c in ("crew-a", "crew-b")
        ]
        try:
            for ref in refs:
                start_crew(ref)
            for ref in refs:
                assert wait_finished(ref, timeout=30).result == "posted"
        finally:
            for ref in refs:
                ref.stop()
    sink.close()
    for crew in ("crew-a", "crew-b"):
        workflow = tracing.one(f"invoke_workflow {crew}")
        trace_id = workflow.context.trace_id
        [turn] = [s for s in tracing.spans("invoke_agent writer") if s.context.trace_id == trace_id]
        [post] = [s for s in tracing.spans("event_hub.post") if _attributes(s)["crew.source"] == crew]
        chats = [s for s in tracing.spans("chat scripted") if _attributes(s)["orkeon.crew.id"] == crew]
        [tool] = [s for s in tracing.spans("execute_tool post_message") if _attributes(s)["orkeon.crew.id"] == crew]
        assert len(chats) == 2
        assert post.context.trace_id == trace_id  # the hub's span of the agent's post, in the crew's trace
        assert post.parent is not None and post.parent.span_id == workflow.context.span_id
        assert turn.parent is not None and turn.parent.span_id == workflow.context.span_id
        for child in (*chats, tool):
            assert child.context.trace_id == trace_id
            assert child.parent is not None and child.parent.span_id == turn.context.span_id
    a, b = (tracing.one(f"invoke_workflow {c}").context.trace_id for c in ("crew-a", "crew-b"))
    assert a != b


def test_a_crew_outside_an_observer_keeps_the_hubs_own_traces(start_runtime: StartRuntime, tracing: Tracing) -> None:
    rt = start_runtime(middleware=[TelemetryMiddleware(tracing.provider)])
    sink = rt.hub.register_mailbox(ok.MailboxAddress.parse("agent://sink/s"))
    observe_agents(rt, tracer_provider=tracing.provider).close()
    assert rt.agent_events.crew_scope is None  # a closed observer leaves no trace context behind
    ref = CrewActor.start(rt.hub, agents=[_poster("c")], orchestration=Sequential([Task("go", "writer")]), crew_id="c")
    try:
        start_crew(ref)
        assert wait_finished(ref, timeout=30).result == "posted"
    finally:
        ref.stop()
    sink.close()
    [post] = tracing.spans("event_hub.post")
    assert post.parent is None


def test_a_captured_conversation_takes_the_conventions_message_form() -> None:
    prompt = json.dumps(
        [
            {"role": "system", "content": "be brief", "tool_calls": [], "tool_call_id": None, "name": None},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "t1", "name": "lookup", "arguments": '{"sku": 42}'}],
                "tool_call_id": None,
                "name": None,
            },
            {"role": "tool", "content": '{"price": 9}', "tool_calls": [], "tool_call_id": "t1", "name": "lookup"},
        ]
    )
    assert json.loads(input_messages(prompt)) == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "lookup", "arguments": {"sku": 42}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "response": '{"price": 9}'}]},
    ]
    finished = ModelCallFinished(
        call_id="c",
        crew_id="k",
        agent_id="a",
        turn=0,
        model="m",
        provider="p",
        started_at=T0,
        duration_s=1.0,
        finish_reasons=("tool_calls",),
        tool_calls=("lookup",),
        answer="",
    )
    assert json.loads(output_messages(finished)) == [
        {"role": "assistant", "parts": [{"type": "tool_call", "name": "lookup"}], "finish_reason": "tool_calls"}
    ]


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("true", True),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("event_only", False),
        ("no_content", False),
        ("false", False),
        ("", False),
    ],
)
def test_the_environment_opt_in_reads_the_instrumentations_values(
    value: str, on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
    with observe_agents(AgentEventJournal()) as observer:
        assert observer.capture_content is on
