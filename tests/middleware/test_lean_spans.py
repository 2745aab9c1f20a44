"""The telemetry stage's lean span path keeps the SDK's semantics: sampler decisions,
resource and scope, sampler attributes, and every exported span identical to the SDK
path's for each stock sampler (spec §14.1)."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    Decision,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    TraceState,
    set_span_in_context,
)
from opentelemetry.util.types import Attributes

import orkeon_actors as ok
from orkeon_actors.middleware import Next, TelemetryMiddleware
from orkeon_actors.middleware.lean_spans import LeanTracer
from orkeon_actors.middleware.telemetry import TRACEPARENT
from tests.middleware.conftest import StartRuntime

MAILBOX = "agent://crew-b/inbox"

SAMPLERS: list[Sampler] = [
    ALWAYS_ON,
    ALWAYS_OFF,
    DEFAULT_ON,
    DEFAULT_OFF,
    TraceIdRatioBased(0.5),
    ParentBasedTraceIdRatio(0.25),
    ParentBased(TraceIdRatioBased(0.5), remote_parent_sampled=ALWAYS_OFF, local_parent_not_sampled=ALWAYS_ON),
]


def _lean(sampler: Sampler) -> LeanTracer:
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    lean = LeanTracer.plan_for(provider.get_tracer("t"))
    assert lean is not None
    return lean


@given(
    sampler=st.sampled_from(SAMPLERS),
    trace_id=st.integers(1, 2**128 - 1),
    parent=st.none()
    | st.builds(
        lambda trace_id, span_id, remote, sampled, state: SpanContext(
            trace_id, span_id, remote, TraceFlags(TraceFlags.SAMPLED if sampled else 0), TraceState(state)
        ),
        st.integers(1, 2**128 - 1),
        st.integers(1, 2**64 - 1),
        st.booleans(),
        st.booleans(),
        st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xyz")), max_size=2, unique_by=lambda kv: kv[0]),
    ),
)
def test_the_inline_sampler_decision_is_the_sdks(sampler: Sampler, trace_id: int, parent: SpanContext | None) -> None:
    attributes = {"event.topic": "t"}
    trace_id = parent.trace_id if parent is not None else trace_id
    context = None if parent is None else set_span_in_context(NonRecordingSpan(parent))
    expected = sampler.should_sample(context, trace_id, "event_hub.post", SpanKind.PRODUCER, attributes, None)
    got = _lean(sampler).decide(parent, trace_id, "event_hub.post", SpanKind.PRODUCER, lambda: attributes, None)
    assert got.sampled == expected.decision.is_sampled()
    assert got.recording == expected.decision.is_recording()
    assert got.trace_state == expected.trace_state
    assert (dict(got.attributes) if got.attributes else None) == (
        dict(expected.attributes) if expected.attributes else None
    )


class TaggingSampler(Sampler):
    """Not a stock sampler: samples everything, adds an attribute and a trace state."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        return SamplingResult(
            Decision.RECORD_AND_SAMPLE, {**dict(attributes or {}), "sampler.tag": name}, TraceState([("tag", "1")])
        )

    def get_description(self) -> str:
        return "TaggingSampler"


def _provider(sampler: Sampler, resource: Resource | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, resource=resource or Resource.create({}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_a_custom_samplers_attributes_and_trace_state_reach_the_spans(start_runtime: StartRuntime) -> None:
    provider, exporter = _provider(TaggingSampler())
    rt = start_runtime([TelemetryMiddleware(provider)])
    registration = rt.hub.register_mailbox(MAILBOX)
    sent = rt.hub.bind("crew-a", "writer").post(MAILBOX, 1)
    with registration.reader() as reader:
        reader.receive()
    post, receive = sorted(exporter.get_finished_spans(), key=lambda s: s.name)
    assert dict(post.attributes or {})["sampler.tag"] == "event_hub.post"
    assert dict(receive.attributes or {})["sampler.tag"] == "event_hub.receive"
    assert dict(post.attributes or {})["event.outcome"] == "accepted"
    assert sent.metadata["tracestate"] == "tag=1"


def test_an_always_off_provider_exports_nothing_and_still_propagates(start_runtime: StartRuntime) -> None:
    provider, exporter = _provider(ALWAYS_OFF)
    rt = start_runtime([TelemetryMiddleware(provider)])
    registration = rt.hub.register_mailbox(MAILBOX)
    sent = rt.hub.bind("crew-a", "writer").post(MAILBOX, 1)
    with registration.reader() as reader:
        reader.receive()
    assert exporter.get_finished_spans() == ()
    assert sent.metadata[TRACEPARENT].endswith("-02")  # random trace id, not sampled


def test_a_ratio_sampler_keeps_whole_traces(start_runtime: StartRuntime) -> None:
    provider, exporter = _provider(ParentBasedTraceIdRatio(0.5))
    rt = start_runtime([TelemetryMiddleware(provider)])
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    sampled = sum(client.post(MAILBOX, n).metadata[TRACEPARENT].endswith("-03") for n in range(200))
    with registration.reader() as reader:
        for _ in range(200):
            reader.receive()
    spans = exporter.get_finished_spans()
    assert 0 < sampled < 200
    assert sorted(s.name for s in spans) == ["event_hub.post"] * sampled + ["event_hub.receive"] * sampled
    posts = {s.context.trace_id for s in spans if s.name == "event_hub.post" and s.context is not None}
    assert {s.context.trace_id for s in spans if s.name == "event_hub.receive" and s.context is not None} == posts


def test_spans_carry_the_providers_resource_and_the_stages_scope(start_runtime: StartRuntime) -> None:
    provider, exporter = _provider(DEFAULT_ON, Resource.create({"service.name": "crew-svc"}))
    rt = start_runtime([TelemetryMiddleware(provider)])
    rt.hub.bind("crew-a", "writer").publish("news", 1)
    (span,) = exporter.get_finished_spans()
    assert span.resource.attributes["service.name"] == "crew-svc"
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "orkeon_actors.event_hub"
    assert span.start_time is not None and span.end_time is not None and span.start_time <= span.end_time


def test_a_processor_added_later_is_honoured(start_runtime: StartRuntime) -> None:
    from tests.middleware.conftest import StartObserver

    provider, exporter = _provider(DEFAULT_ON)
    rt = start_runtime([TelemetryMiddleware(provider)])
    client = rt.hub.bind("crew-a", "writer")
    client.publish("news", 1)
    observer = StartObserver()
    provider.add_span_processor(observer)
    client.publish("news", 2)
    assert observer.started == ["event_hub.publish"]
    assert len(exporter.get_finished_spans()) == 2


def test_the_installed_sdk_takes_the_lean_path_unless_a_processor_acts_on_start() -> None:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from tests.middleware.conftest import StartObserver

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    assert LeanTracer.plan_for(provider.get_tracer("t")) is not None, (
        "the installed opentelemetry-sdk no longer matches the internals the lean span path reads"
    )
    provider.add_span_processor(StartObserver())
    assert LeanTracer.plan_for(provider.get_tracer("t")) is None
    provider.shutdown()


# -- parity: every exported span of the lean path is the SDK path's ---------------------


class SeededIds(IdGenerator):
    """Pseudo-random ids from a seed: two providers given the same seed draw the same
    ids in the same order, so the lean and the SDK path can be compared span by span."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1

    def is_trace_id_random(self) -> bool:
        return True


class OpaqueSimpleProcessor(SimpleSpanProcessor):
    """The simple processor under another type: the stage cannot tell that its
    ``on_start`` does nothing, so it takes the SDK path."""


class RefuseTopic:
    """A stage after telemetry refusing one topic (the span records the refusal)."""

    def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
        if message.topic == "refused.topic":
            raise ok.errors.InvalidArgumentError("refused by the test stage")
        return next(message)

    def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
        return next(message)


PARITY_SAMPLERS: list[Sampler] = [
    ALWAYS_ON,
    ALWAYS_OFF,
    DEFAULT_ON,
    DEFAULT_OFF,
    TraceIdRatioBased(0.5),
    ParentBasedTraceIdRatio(0.01),
    ParentBasedTraceIdRatio(0.5),
    ParentBased(TraceIdRatioBased(0.5), remote_parent_sampled=ALWAYS_OFF, local_parent_not_sampled=ALWAYS_ON),
]


def _traffic(start_runtime: StartRuntime, provider: TracerProvider) -> list[ok.Message]:
    """Every kind of span the stage records: publish (with and without a remote parent,
    sampled and not), post and receive, send, its receipt and the linked reply, and a
    refusal. Causally ordered, so both paths draw their ids in the same order."""
    rt = start_runtime([TelemetryMiddleware(provider), RefuseTopic()])
    registration = rt.hub.register_mailbox(MAILBOX)
    writer = rt.hub.bind("crew-a", "writer")
    reader_client = rt.hub.bind("crew-b", "inbox")
    kept: list[ok.Message] = []
    for n in range(12):
        kept.append(writer.publish("news", n))
        kept.append(writer.post(MAILBOX, n))
    for sampled in (True, False):
        remote = SpanContext(0xABC, 0xDEF, True, TraceFlags(TraceFlags.SAMPLED if sampled else 0))
        metadata = {TRACEPARENT: f"00-{remote.trace_id:032x}-{remote.span_id:016x}-{remote.trace_flags:02x}"}
        kept.append(writer.publish("news", "remote", ok.PublishOptions(metadata=metadata)))
    with pytest.raises(ok.errors.InvalidArgumentError):
        writer.publish("refused.topic", 1)
    with registration.reader() as reader:
        for _ in range(12):
            kept.append(reader.receive())
    answered: list[ok.Message] = []

    def respond() -> None:
        with registration.reader() as reader:
            request = reader.receive()
            assert request.correlation_id is not None
            answered.append(request)
            answered.append(reader_client.reply(request.correlation_id, "answer"))

    responder = threading.Thread(target=respond)
    responder.start()
    kept.append(writer.send(MAILBOX, "question", timeout=30))
    responder.join()
    kept.extend(answered)
    return kept


_MINTED = ("event.message_id", "event.correlation_id")


def _span_view(span: ReadableSpan, ordinals: dict[str, int]) -> tuple[object, ...]:
    """What an exporter sees of ``span``, but the times and the ids the hub mints (each
    run mints its own; they are replaced by their order of first appearance)."""
    attributes = dict(span.attributes or {})
    for key in _MINTED:
        if key in attributes:
            attributes[key] = ordinals.setdefault(str(attributes[key]), len(ordinals))
    events = [
        (e.name, {k: v for k, v in (e.attributes or {}).items() if k != "exception.stacktrace"}) for e in span.events
    ]
    return (
        span.name,
        span.kind,
        span.context,
        span.parent,
        attributes,
        [(link.context, dict(link.attributes or {})) for link in span.links],
        (span.status.status_code, span.status.description),
        events,
        span.resource,
        span.instrumentation_scope,
    )


@pytest.mark.parametrize("sampler", PARITY_SAMPLERS, ids=lambda s: s.get_description())
def test_every_span_of_the_lean_path_is_the_sdk_paths(start_runtime: StartRuntime, sampler: Sampler) -> None:
    recorded: dict[bool, tuple[list[tuple[object, ...]], list[ok.Message]]] = {}
    for lean in (True, False):
        exporter = InMemorySpanExporter()
        provider = TracerProvider(
            sampler=sampler, resource=Resource.create({"service.name": "parity"}), id_generator=SeededIds(7)
        )
        provider.add_span_processor((SimpleSpanProcessor if lean else OpaqueSimpleProcessor)(exporter))
        assert (LeanTracer.plan_for(provider.get_tracer("orkeon_actors.event_hub")) is not None) is lean
        messages = _traffic(start_runtime, provider)
        ordinals: dict[str, int] = {}
        recorded[lean] = ([_span_view(span, ordinals) for span in exporter.get_finished_spans()], messages)
        provider.shutdown()
    (lean_spans, lean_messages), (sdk_spans, sdk_messages) = recorded[True], recorded[False]
    assert lean_spans == sdk_spans
    assert [dict(m.metadata) for m in lean_messages] == [dict(m.metadata) for m in sdk_messages]
