"""OpenTelemetry for agents, by the GenAI semantic conventions: spans and metrics built
from a runtime's agent events (:mod:`orkeon_actors.model.agent_events`).

Turned on with :func:`observe_agents`::

    observer = ok.observe_agents(rt, tracer_provider=provider, meter_provider=meters)
    ...
    observer.close()   # ends what is still open (also a context manager)

Spans (tracer ``orkeon_actors.agents``), after the conventions' "GenAI agent and
framework spans" and "GenAI client spans" (OpenTelemetry semantic conventions, gen-ai):

* ``invoke_workflow {crew}``, one per crew (INTERNAL): the root of the crew's trace. It
  starts at the crew's first event and ends when the observer is closed (or when more
  than ``open_crews`` crews are open, the oldest first).
* ``invoke_agent {agent}``, one per agent turn (INTERNAL), a child of its crew's span: from
  the agent's first model or tool call of a task to its :class:`AgentAnswered`, or to its
  :class:`AgentFailed`, where it ends with status ERROR, ``error.type`` and
  ``orkeon.agent.failure_reason`` (the event's ``reason``).
* ``chat {model}``, one per model call (CLIENT), a child of the turn:
  ``gen_ai.operation.name`` = ``chat``, ``gen_ai.provider.name``,
  ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.response.finish_reasons``; a failed call has
  status ERROR and ``error.type`` (the part of the event's ``error`` before its first
  ``:``).
* ``execute_tool {name}``, one per tool call (INTERNAL), a child of the turn:
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``; ERROR status on an error result.

The crew's trace holds its hub messages too. Spans are built after the fact, on the
observer's thread, so a crew's trace ids are chosen up front (derived from the crew id and
the observer's random salt; the sampled flag is the tracer's sampler's decision for the
root, asked once per crew) and the observer sets the journal's ``crew_scope``: a crew
makes that context current on its thread around each step of its agents, so the
``event_hub.*`` spans of what they publish (:class:`~orkeon_actors.middleware.TelemetryMiddleware`)
are children of ``invoke_workflow {crew}``. That takes an SDK tracer (the workflow span
is then built with the chosen ids, :func:`~orkeon_actors.middleware.lean_spans.start_root_as`);
with any other provider the crew's GenAI spans are a trace of their own, as its hub
spans are. One observer per runtime sets the scope (the last one started).

Every span carries ``gen_ai.agent.id`` / ``gen_ai.agent.name`` (the agent id) and
``orkeon.crew.id``; times are the events' own (``started_at`` and ``duration_s``), so a
span says when the call ran, not when the observer heard of it.

Metrics (meter ``orkeon_actors.agents``), the conventions' client metrics with their
advised buckets: ``gen_ai.client.token.usage`` (``{token}``, one record per call and
``gen_ai.token.type`` ``input`` / ``output``) and ``gen_ai.client.operation.duration``
(``s``; ``error.type`` on a failed call).

Content (prompts, answers, tool arguments and results) is opt-in, as the conventions say:
``capture_content=True``, or the environment variable
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (or ``span_only`` /
``span_and_event``; :data:`CONTENT_ON_SPANS`). Opting in also turns on the
journal's ``capture_content`` (the agent loop fills the content fields only then) and puts
``gen_ai.input.messages`` / ``gen_ai.output.messages`` on chat spans (in the conventions'
JSON form: role and parts, :func:`input_messages`, :func:`output_messages`) and
``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result`` on tool spans. A journal
capturing content for another observer does not put content on spans.

Cost: the journal calls the observer on the emitting thread (a crew's, or the runtime's
model I/O loop); the observer only queues the event there. Its own thread builds the
spans and hands them to the provider's span processors (use ``BatchSpanProcessor`` in
production, so exporting happens on the SDK's thread, not this one). The observer first
replays the journal's kept history, so calls made before it attached are spans too.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import secrets
import threading
from collections import OrderedDict
from collections.abc import MutableMapping
from datetime import datetime
from typing import Any, Final, Protocol

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode, TracerProvider

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.middleware.lean_spans import ids_choosable, root_flags, start_root_as
from orkeon_actors.model.agent_events import (
    AgentAnswered,
    AgentEvent,
    AgentEventJournal,
    AgentFailed,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "INSTRUMENTATION_NAME",
    "AgentTelemetry",
    "HasAgentEvents",
    "observe_agents",
]

INSTRUMENTATION_NAME: Final = "orkeon_actors.agents"
"""Name of the tracer and of the meter."""
CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' opt-in for content capture (:data:`CONTENT_ON_SPANS` turns it on)."""
CONTENT_ON_SPANS: Final = ("true", "1", "yes", "span_only", "span_and_event")
"""The values of :data:`CAPTURE_CONTENT_ENV` (any case) that put content on spans: ``true``
(the OpenTelemetry GenAI instrumentations' boolean) and ``span_only`` /
``span_and_event`` (their newer per-destination values; ``event_only`` and
``no_content`` keep it off spans, as anything else does)."""

TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
"""``gen_ai.client.token.usage``'s advised bucket boundaries."""
_ROOT: Final = Context()
"""An empty context: a crew's span starts a trace of its own, whatever span is current."""
DURATION_BUCKETS: Final = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
"""``gen_ai.client.operation.duration``'s advised bucket boundaries (seconds)."""


_Open = tuple[Span, Context, int]
"""An open span, its context (to parent others) and the time of its last event (ns)."""


class _Flush:
    """A marker in the worker's queue: set when the worker reaches it."""

    def __init__(self) -> None:
        self.done = threading.Event()


class HasAgentEvents(Protocol):
    """What :func:`observe_agents` observes: a runtime (anything with ``agent_events``)."""

    @property
    def agent_events(self) -> AgentEventJournal: ...


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000) * 1_000


def _error_type(error: str) -> str:
    return error.split(":", 1)[0].strip() or "error"


def _content_opted_in(capture_content: bool | None) -> bool:
    if capture_content is not None:
        return capture_content
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in CONTENT_ON_SPANS


class AgentTelemetry:
    """The GenAI spans and metrics of one journal's events (module docstring). Made by
    :func:`observe_agents`. The journal's callback only queues the event; one worker
    thread (``orkeon-genai-spans``) builds the spans and records the metrics, in the
    journal's order. :meth:`flush` waits for what is queued; :meth:`close` stops
    observing, flushes, and ends the turn and crew spans still open (at the last event
    seen for them). Thread-safe."""

    def __init__(
        self,
        journal: AgentEventJournal,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        *,
        capture_content: bool | None = None,
        open_crews: int = 10_000,
    ) -> None:
        if isinstance(open_crews, bool) or not isinstance(open_crews, int) or open_crews < 1:
            raise InvalidArgumentError(f"open_crews must be a positive integer, got {open_crews!r}")
        self.capture_content = _content_opted_in(capture_content)
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=meter_provider)
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self._open_crews = open_crews
        self._queue: queue.SimpleQueue[AgentEvent | _Flush | None] = queue.SimpleQueue()
        self._crews: OrderedDict[str, _Open] = OrderedDict()
        self._turns: dict[tuple[str, str], _Open] = {}
        self._content: dict[str, str] = {}
        """A call's prompt or tool arguments (from its started event) until it finishes."""
        self._closed = False
        self._closing = threading.Lock()
        tracer = self._tracer
        self._sdk: SdkTracer | None = tracer if isinstance(tracer, SdkTracer) and ids_choosable(tracer) else None
        """The SDK tracer when crews' traces can be joined (ids chosen up front), else ``None``."""
        self._salt = secrets.token_bytes(16)
        self._crew_contexts: OrderedDict[str, tuple[SpanContext, Context]] = OrderedDict()
        self._crew_contexts_lock = threading.Lock()
        self._journal = journal
        if self.capture_content:
            journal.capture_content = True
        if self._sdk is not None:
            journal.crew_scope = self.crew_scope
        history, self._unsubscribe = journal.subscribe(self.observe)
        self._worker = threading.Thread(target=self._work, args=(history,), name="orkeon-genai-spans", daemon=True)
        self._worker.start()

    # -- the subscriber and its worker ---------------------------------------------------

    def observe(self, event: AgentEvent) -> None:
        """Queue one event (the journal calls this on the emitting thread: it only queues)."""
        self._queue.put(event)

    def crew_context(self, crew_id: str) -> SpanContext:
        """The span context of ``crew_id``'s ``invoke_workflow`` span: ids derived from
        the crew id (and this observer's random salt, so each observer, and each run,
        has its own traces), its sampled flag the tracer's sampler's decision for a root
        span, asked once per crew (kept for the last ``open_crews`` crews)."""
        return self._crew_entry(crew_id)[0]

    def _crew_entry(self, crew_id: str) -> tuple[SpanContext, Context]:
        with self._crew_contexts_lock:
            entry = self._crew_contexts.get(crew_id)
            if entry is not None:
                return entry
        digest = hashlib.blake2b(crew_id.encode(), key=self._salt, digest_size=24).digest()
        trace_id = int.from_bytes(digest[:16], "big") or 1
        span_id = int.from_bytes(digest[16:], "big") or 1
        assert self._sdk is not None
        name = f"invoke_workflow {crew_id}"
        attributes = {"gen_ai.operation.name": "invoke_workflow", "orkeon.crew.id": crew_id}
        flags = root_flags(self._sdk, trace_id, name, SpanKind.INTERNAL, attributes)
        span_context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags)
        entry = (span_context, trace.set_span_in_context(NonRecordingSpan(span_context)))
        with self._crew_contexts_lock:
            entry = self._crew_contexts.setdefault(crew_id, entry)
            while len(self._crew_contexts) > self._open_crews:
                self._crew_contexts.popitem(last=False)
        return entry

    def crew_scope(self, crew_id: str) -> _CrewScope:
        """The journal's ``crew_scope``: a context manager that makes ``crew_id``'s trace
        context the current one (a crew enters it around its agents' steps, so the hub
        spans of what they publish are children of the crew's ``invoke_workflow``)."""
        return _CrewScope(self._crew_entry(crew_id)[1])

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event queued so far became spans and metric records; false
        when ``timeout`` seconds passed first."""
        if not self._worker.is_alive():
            return True
        marker = _Flush()
        self._queue.put(marker)
        return marker.done.wait(timeout)

    def _work(self, history: tuple[AgentEvent, ...]) -> None:
        """The worker thread: the history kept before subscribing, then each queued event,
        in order, until ``close`` queues ``None``."""
        for event in history:
            self._handle(event)
        while (item := self._queue.get()) is not None:
            if isinstance(item, _Flush):
                item.done.set()
            else:
                self._handle(item)

    def _handle(self, event: AgentEvent) -> None:
        if isinstance(event, ModelCallFinished):
            self._model_call(event)
        elif isinstance(event, ToolCallFinished):
            self._tool_call(event)
        elif isinstance(event, ModelCallStarted | ToolCallStarted):
            self._turn(event.crew_id, event.agent_id, _ns(event.started_at))
            content = event.prompt if isinstance(event, ModelCallStarted) else event.arguments
            if self.capture_content and content is not None:
                self._content[event.call_id] = content
        elif isinstance(event, AgentAnswered):
            self._answered(event)
        elif isinstance(event, AgentFailed):
            self._failed(event)

    def _open(
        self,
        spans: MutableMapping[Any, _Open],
        key: object,
        name: str,
        parent: Context,
        attributes: dict[str, str],
        at_ns: int,
    ) -> Context:
        """The context of the span open under ``key`` in ``spans`` (its last event moved to
        ``at_ns``), started now as ``name`` when none is open."""
        entry = spans.get(key)
        if entry is not None:
            span, context, last = entry
            spans[key] = (span, context, max(last, at_ns))
            return context
        span = self._tracer.start_span(
            name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes, start_time=at_ns
        )
        context = trace.set_span_in_context(span)
        spans[key] = (span, context, at_ns)
        return context

    def _crew(self, crew_id: str, at_ns: int) -> Context:
        attributes = {"gen_ai.operation.name": "invoke_workflow", "orkeon.crew.id": crew_id}
        name = f"invoke_workflow {crew_id}"
        if self._sdk is None or crew_id in self._crews:
            context = self._open(self._crews, crew_id, name, _ROOT, attributes, at_ns)
        else:  # the crew's trace, with the ids its hub spans already name as their parent
            span = start_root_as(self._sdk, name, self.crew_context(crew_id), SpanKind.INTERNAL, attributes, at_ns)
            context = trace.set_span_in_context(span)
            self._crews[crew_id] = (span, context, at_ns)
        while len(self._crews) > self._open_crews:
            _, (old, _, old_last) = self._crews.popitem(last=False)
            old.end(end_time=old_last)
        return context

    def _turn(self, crew_id: str, agent_id: str, at_ns: int) -> Context:
        parent = self._crew(crew_id, at_ns)
        attributes = {"gen_ai.operation.name": "invoke_agent", **_agent_attributes(crew_id, agent_id)}
        return self._open(self._turns, (crew_id, agent_id), f"invoke_agent {agent_id}", parent, attributes, at_ns)

    def _model_call(self, event: ModelCallFinished) -> None:
        start = _ns(event.started_at)
        end = start + int(event.duration_s * 1e9)
        parent = self._turn(event.crew_id, event.agent_id, start)
        self._touch(event.crew_id, event.agent_id, end)
        attributes: dict[str, str | int | list[str]] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": event.provider,
            "gen_ai.request.model": event.model,
            "gen_ai.usage.input_tokens": event.input_tokens,
            "gen_ai.usage.output_tokens": event.output_tokens,
            "gen_ai.response.finish_reasons": list(event.finish_reasons),
            **_agent_attributes(event.crew_id, event.agent_id),
        }
        if event.response_model is not None:
            attributes["gen_ai.response.model"] = event.response_model
        prompt = self._content.pop(event.call_id, None)
        if prompt is not None:
            attributes["gen_ai.input.messages"] = input_messages(prompt)
        if self.capture_content and event.answer is not None:
            attributes["gen_ai.output.messages"] = output_messages(event)
        span = self._tracer.start_span(
            f"chat {event.model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes, start_time=start
        )
        metric_attributes: dict[str, str] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": event.provider,
            "gen_ai.request.model": event.model,
        }
        if event.response_model is not None:
            metric_attributes["gen_ai.response.model"] = event.response_model
        if event.error is not None:
            _fail(span, event.error)
            self._duration.record(event.duration_s, {**metric_attributes, "error.type": _error_type(event.error)})
        else:
            self._duration.record(event.duration_s, metric_attributes)
        span.end(end_time=end)
        self._tokens.record(event.input_tokens, {**metric_attributes, "gen_ai.token.type": "input"})
        self._tokens.record(event.output_tokens, {**metric_attributes, "gen_ai.token.type": "output"})

    def _tool_call(self, event: ToolCallFinished) -> None:
        start = _ns(event.started_at)
        end = start + int(event.duration_s * 1e9)
        parent = self._turn(event.crew_id, event.agent_id, start)
        self._touch(event.crew_id, event.agent_id, end)
        attributes: dict[str, str | bool] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.tool_call_id,
            **_agent_attributes(event.crew_id, event.agent_id),
        }
        if event.replayed:
            attributes["orkeon.tool.replayed"] = True
        arguments = self._content.pop(event.call_id, None)
        if arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = arguments
        if self.capture_content and event.result is not None:
            attributes["gen_ai.tool.call.result"] = event.result
        span = self._tracer.start_span(
            f"execute_tool {event.name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start,
        )
        if event.error is not None:
            _fail(span, event.error)
        span.end(end_time=end)

    def _answered(self, event: AgentAnswered) -> None:
        at = _ns(event.at)
        self._turn(event.crew_id, event.agent_id, at)
        span, _, _ = self._turns.pop((event.crew_id, event.agent_id))
        self._touch_crew(event.crew_id, at)
        span.end(end_time=at)

    def _failed(self, event: AgentFailed) -> None:
        at = _ns(event.at)
        self._turn(event.crew_id, event.agent_id, at)
        span, _, _ = self._turns.pop((event.crew_id, event.agent_id))
        self._touch_crew(event.crew_id, at)
        span.set_attribute("orkeon.agent.failure_reason", event.reason)
        if event.tool is not None:
            span.set_attribute("gen_ai.tool.name", event.tool)
        _fail(span, event.error)
        span.end(end_time=at)

    def _touch(self, crew_id: str, agent_id: str, at_ns: int) -> None:
        """Move the turn's and the crew's last event to ``at_ns`` (a call's end)."""
        self._turn(crew_id, agent_id, at_ns)

    def _touch_crew(self, crew_id: str, at_ns: int) -> None:
        entry = self._crews.get(crew_id)
        if entry is not None:
            self._crews[crew_id] = (entry[0], entry[1], max(entry[2], at_ns))

    # -- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop observing, make spans of every event queued so far, then end the open turn
        and crew spans at their last event. Idempotent."""
        self._unsubscribe()
        if self._journal.crew_scope == self.crew_scope:
            self._journal.crew_scope = None
        with self._closing:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)
        self._worker.join()
        for span, _, last in self._turns.values():
            span.end(end_time=last)
        for span, _, last in self._crews.values():
            span.end(end_time=last)
        self._turns.clear()
        self._crews.clear()
        self._content.clear()

    def __enter__(self) -> AgentTelemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AgentTelemetry(open_turns={len(self._turns)}, closed={self._closed})"


class _CrewScope:
    """Attaches a crew's trace context on entry and detaches it on exit (same thread)."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: Context) -> None:
        self._context = context
        self._token: object = None

    def __enter__(self) -> _CrewScope:
        self._token = otel_context.attach(self._context)
        return self

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]


def input_messages(prompt: str) -> str:
    """The conversation an agent sent (the ``prompt`` of a
    :class:`~orkeon_actors.model.agent_events.ModelCallStarted`: its messages as JSON) in
    the conventions' ``gen_ai.input.messages`` form: a JSON array of ``{"role", "parts"}``,
    each part a ``text`` (``content``), a ``tool_call`` (``id``, ``name``, ``arguments``)
    or a ``tool_call_response`` (``id``, ``response``). Text that is not such an array is
    kept as one user text part."""
    try:
        messages = json.loads(prompt)
    except ValueError:
        messages = None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return json.dumps([{"role": "user", "parts": [{"type": "text", "content": prompt}]}])
    converted = []
    for message in messages:
        role = message.get("role", "user")
        parts: list[dict[str, Any]] = []
        if role == "tool":
            parts.append(
                {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": message.get("content")}
            )
        elif message.get("content"):
            parts.append({"type": "text", "content": message["content"]})
        for call in message.get("tool_calls") or ():
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "arguments": _json_or_text(call.get("arguments")),
                }
            )
        converted.append({"role": role, "parts": parts})
    return json.dumps(converted)


def output_messages(event: ModelCallFinished) -> str:
    """The model's answer in the conventions' ``gen_ai.output.messages`` form: one
    assistant message with its text part, a ``tool_call`` part per tool it asked for (by
    name: the arguments are not in the event) and its ``finish_reason``."""
    parts: list[dict[str, Any]] = []
    if event.answer:
        parts.append({"type": "text", "content": event.answer})
    parts.extend({"type": "tool_call", "name": name} for name in event.tool_calls)
    reason = event.finish_reasons[0] if event.finish_reasons else "stop"
    return json.dumps([{"role": "assistant", "parts": parts, "finish_reason": reason}])


def _json_or_text(text: object) -> object:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _agent_attributes(crew_id: str, agent_id: str) -> dict[str, str]:
    return {"gen_ai.agent.id": agent_id, "gen_ai.agent.name": agent_id, "orkeon.crew.id": crew_id}


def _fail(span: Span, error: str) -> None:
    span.set_attribute("error.type", _error_type(error))
    span.set_status(Status(StatusCode.ERROR, error))


def observe_agents(
    runtime: HasAgentEvents | AgentEventJournal,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: bool | None = None,
) -> AgentTelemetry:
    """Make GenAI spans and metrics of what ``runtime``'s agents do (module docstring),
    from now on and from the journal's kept history. ``None`` providers are the global
    ones; ``capture_content=None`` follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    journal = runtime if isinstance(runtime, AgentEventJournal) else runtime.agent_events
    return AgentTelemetry(
        journal, tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=capture_content
    )
