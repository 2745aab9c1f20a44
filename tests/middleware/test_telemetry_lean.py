"""The telemetry stage's lean span path keeps the SDK's semantics: sampler decisions,
resource and scope, sampler attributes, the message copy (spec §14.1)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
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
from orkeon_actors.middleware import TelemetryMiddleware
from orkeon_actors.middleware.telemetry import TRACEPARENT, _LeanTracer
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
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


def _lean(sampler: Sampler) -> _LeanTracer:
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    lean = _LeanTracer.plan_for(provider.get_tracer("t"))
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
    got = _lean(sampler).decide(parent, trace_id, "event_hub.post", SpanKind.PRODUCER, attributes, None)
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


@pytest.mark.parametrize("correlated", [False, True])
def test_the_message_copy_keeps_every_field(correlated: bool) -> None:
    message = ok.Message(
        MessageId.new(),
        "_system.send",
        CrewId("crew-a"),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        b'{"n":1}',
        {"k": "v"},
        AgentId("writer"),
        CrewId("crew-b"),
        MailboxAddress.parse(MAILBOX),
        CorrelationId.new() if correlated else None,
        "schema.v1",
    )
    extra = {TRACEPARENT: "00-00000000000000000000000000000001-0000000000000001-01"}
    assert message.with_metadata(extra) == attrs.evolve(message, metadata=message.metadata.merged(extra))
    assert [f.name for f in attrs.fields(ok.Message)] == [
        "id",
        "topic",
        "source_crew_id",
        "published_at",
        "payload",
        "metadata",
        "source_agent_id",
        "target_crew_id",
        "target_mailbox",
        "correlation_id",
        "schema_id",
    ], "Message gained or reordered a field: update Message.with_metadata"


def test_the_installed_sdk_takes_the_lean_path_unless_a_processor_acts_on_start() -> None:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from tests.middleware.conftest import StartObserver

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    assert _LeanTracer.plan_for(provider.get_tracer("t")) is not None, (
        "the installed opentelemetry-sdk no longer matches the internals the lean span path reads"
    )
    provider.add_span_processor(StartObserver())
    assert _LeanTracer.plan_for(provider.get_tracer("t")) is None
    provider.shutdown()
