"""Stage 2, telemetry: spans read from an in-memory exporter, metrics from an in-memory
reader (spec §14)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.trace import SpanContext, SpanKind, StatusCode, TraceFlags

import orkeon_actors as ok
from orkeon_actors.errors import EventAclError, InvalidArgumentError
from orkeon_actors.middleware import Pipeline, TelemetryMiddleware
from orkeon_actors.middleware.telemetry import (
    INSTRUMENTATION_NAME,
    TRACEPARENT,
    extract_span_context,
    inject_span_context,
)
from orkeon_actors.testing import wait_until
from tests.conftest import Background
from tests.middleware.conftest import Metrics, StartRuntime, Tracing, attrs_of
from tests.middleware.test_pipeline import Refuse

MAILBOX = "agent://crew-b/inbox"


@pytest.fixture
def stage(tracing: Tracing, metrics: Metrics) -> TelemetryMiddleware:
    return TelemetryMiddleware(tracing.provider, metrics.provider)


def _attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


# -- spans -----------------------------------------------------------------------------


def test_a_scoped_publish_and_its_subscription_get_spans(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    rt = start_runtime([stage])
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("orders.*") as sub:
        sent = client.publish("orders.created", 1, ok.PublishOptions(target_crew_id="crew-a"))
        next(sub)
    publish, subscribe = tracing.one("event_hub.publish"), tracing.one("event_hub.subscribe")
    assert publish.instrumentation_scope is not None
    assert publish.instrumentation_scope.name == INSTRUMENTATION_NAME
    assert (publish.kind, subscribe.kind) == (SpanKind.PRODUCER, SpanKind.CONSUMER)
    assert _attributes(publish) == {
        "event.topic": "orders.created",
        "event.pattern": "publish",
        "event.message_id": str(sent.id),
        "crew.source": "crew-a",
        "crew.target": "crew-a",
        "event.outcome": "accepted",
    }
    assert _attributes(subscribe) == {**_attributes(publish), "event.pattern": "subscribe", "event.outcome": "consumed"}


def test_a_global_publish_has_no_target_crew_attribute(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    rt = start_runtime([stage])
    rt.hub.bind("crew-a", "writer").publish("news", 1)
    assert "crew.target" not in _attributes(tracing.one("event_hub.publish"))
    assert "event.correlation_id" not in _attributes(tracing.one("event_hub.publish"))


def test_post_and_mailbox_consumption_get_spans_per_pattern(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    rt = start_runtime([stage])
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    first, second = client.post(MAILBOX, 1), client.post(MAILBOX, 2)
    rt.hub.bind("crew-b", "inbox").wait_for(ok.WaitOnMailbox(ok.MailboxAddress.parse(MAILBOX)), 10)
    with registration.reader() as reader:
        reader.receive()
    posts = tracing.spans("event_hub.post")
    assert [_attributes(s)["event.message_id"] for s in posts] == [str(first.id), str(second.id)]
    assert _attributes(posts[0])["crew.target"] == "crew-b"
    assert _attributes(tracing.one("event_hub.wait"))["event.message_id"] == str(first.id)
    assert _attributes(tracing.one("event_hub.receive"))["event.message_id"] == str(second.id)


def test_the_receive_span_is_a_child_of_the_publish_span_through_the_message(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    rt = start_runtime([stage])
    registration = rt.hub.register_mailbox(MAILBOX)
    sent = rt.hub.bind("crew-a", "writer").post(MAILBOX, 1)
    with registration.reader() as reader:
        got = reader.receive()
    post, receive = tracing.one("event_hub.post"), tracing.one("event_hub.receive")
    assert post.context is not None and receive.context is not None and receive.parent is not None
    assert sent.metadata[TRACEPARENT] == got.metadata[TRACEPARENT]
    assert extract_span_context(got.metadata) == SpanContext(
        post.context.trace_id, post.context.span_id, True, TraceFlags(TraceFlags.SAMPLED)
    )
    assert receive.context.trace_id == post.context.trace_id
    assert receive.parent.span_id == post.context.span_id


def test_a_reply_span_links_to_its_request_across_actors(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    rt = start_runtime([stage])
    registration = rt.hub.register_mailbox(MAILBOX)
    call = Background(lambda: rt.hub.bind("crew-a", "asker").send(MAILBOX, {"q": 1}, timeout=10))
    with registration.reader() as reader:
        request = reader.receive()
    assert request.correlation_id is not None
    rt.hub.bind("crew-b", "inbox").reply(request.correlation_id, {"a": 1})
    call.get()
    send, receive, reply = (tracing.one(f"event_hub.{p}") for p in ("send", "receive", "reply"))
    assert send.context is not None and receive.context is not None and reply.context is not None
    assert (
        _attributes(send)["event.correlation_id"]
        == _attributes(reply)["event.correlation_id"]
        == str(request.correlation_id)
    )
    assert _attributes(reply)["crew.target"] == "crew-a"
    assert [(link.context.span_id, dict(link.attributes or {})) for link in reply.links] == [
        (send.context.span_id, {"event.link": "request"})
    ]
    assert reply.parent is not None and reply.parent.span_id == receive.context.span_id
    assert {s.context.trace_id for s in (send, receive, reply) if s.context} == {send.context.trace_id}
    assert stage.pending_request_links() == 0  # forgotten once the reply passed


def test_a_reply_to_a_request_from_another_process_links_through_the_traceparent(
    stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    # This stage never saw the request's send (it ran in the requester's process): it
    # learns the request's context from the traceparent the request carries.
    pipeline = Pipeline([stage])
    remote_send = SpanContext(0x1234, 0x5678, True, TraceFlags(TraceFlags.SAMPLED))
    correlation_id = ok.CorrelationId.new()
    now = ok.SystemClock().now()
    request = ok.Message(
        ok.MessageId.new(),
        "_system.send",
        ok.CrewId("crew-a"),
        now,
        metadata=inject_span_context(remote_send),
        target_crew_id=ok.CrewId("crew-b"),
        target_mailbox=ok.MailboxAddress.parse(MAILBOX),
        correlation_id=correlation_id,
    )
    receive_chain = pipeline.receive_chain("receive")
    assert receive_chain is not None
    receive_chain(request)
    reply = ok.Message(
        ok.MessageId.new(),
        "_system.reply",
        ok.CrewId("crew-b"),
        now,
        target_crew_id=ok.CrewId("crew-a"),
        correlation_id=correlation_id,
    )
    pipeline.publish_chain("reply", lambda m: m)(reply)
    receive, reply_span = tracing.one("event_hub.receive"), tracing.one("event_hub.reply")
    assert receive.parent is not None and receive.parent.span_id == 0x5678
    assert [(link.context.trace_id, link.context.span_id) for link in reply_span.links] == [(0x1234, 0x5678)]
    assert reply_span.parent is not None and receive.context is not None
    assert reply_span.parent.span_id == receive.context.span_id


def test_the_callers_current_span_is_the_parent(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    rt = start_runtime([stage])
    tracer = tracing.provider.get_tracer("test")
    with tracer.start_as_current_span("agent step") as step:
        rt.hub.bind("crew-a", "writer").publish("news", 1)
    publish = tracing.one("event_hub.publish")
    assert publish.parent is not None
    assert publish.parent.span_id == step.get_span_context().span_id


def test_a_traceparent_given_by_the_caller_is_the_parent(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    rt = start_runtime([stage])
    upstream = SpanContext(0xABC, 0xDEF, True, TraceFlags(TraceFlags.SAMPLED))
    rt.hub.bind("crew-a", "writer").publish("news", 1, ok.PublishOptions(metadata=inject_span_context(upstream)))
    publish = tracing.one("event_hub.publish")
    assert publish.context is not None and publish.parent is not None
    assert (publish.context.trace_id, publish.parent.span_id) == (0xABC, 0xDEF)


def test_a_refusal_ends_the_span_with_an_error(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing, metrics: Metrics
) -> None:
    rt = start_runtime([stage, Refuse(EventAclError("no link"), {"post"})])
    rt.hub.register_mailbox(MAILBOX)
    with pytest.raises(EventAclError):
        rt.hub.bind("crew-a", "writer").post(MAILBOX, 1)
    post = tracing.one("event_hub.post")
    assert (_attributes(post)["event.outcome"], _attributes(post)["error.type"]) == ("refused", "EventAclError")
    assert post.status.status_code is StatusCode.ERROR
    assert [e.name for e in post.events] == ["exception"]
    assert metrics.values("orkeon_event_published_total") == {}


def test_a_receive_refusal_and_a_drop_have_their_outcomes(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, tracing: Tracing
) -> None:
    from tests.middleware.test_idempotency import KEY, PinId

    rt = start_runtime(
        [PinId(), ok.middleware.IdempotencyMiddleware(), Refuse(EventAclError("x"), {"subscribe"}), stage]
    )
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    key = str(ok.MessageId.new())
    client.post(MAILBOX, 1, {KEY: key})
    with registration.reader() as reader:
        reader.receive()
        rt.hub._deliver_to_mailbox(client.post(MAILBOX, 2))  # type: ignore[attr-defined]  # a redelivery
        client.post(MAILBOX, 3)
        assert [reader.receive().json(), reader.receive().json()] == [2, 3]
    with client.subscribe("news") as sub:
        client.publish("news", 1)
        with pytest.raises(EventAclError):
            next(sub)
    outcomes = [_attributes(s)["event.outcome"] for s in tracing.spans("event_hub.receive")]
    # Registered after the idempotency stage, telemetry runs before it on receive: it
    # sees the duplicate being dropped.
    assert outcomes == ["consumed", "consumed", "dropped", "consumed"]
    assert _attributes(tracing.one("event_hub.subscribe"))["event.outcome"] == "refused"


def test_no_traceparent_without_a_recording_provider(start_runtime: StartRuntime) -> None:
    rt = start_runtime([TelemetryMiddleware()])  # the global providers: no-ops unless set
    assert TRACEPARENT not in rt.hub.bind("crew-a", "writer").publish("news", 1).metadata


# -- trace context format --------------------------------------------------------------


@given(
    trace_id=st.integers(1, 2**128 - 1),
    span_id=st.integers(1, 2**64 - 1),
    sampled=st.booleans(),
    state=st.lists(
        st.tuples(
            st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True), st.from_regex(r"[a-z0-9]{1,5}", fullmatch=True)
        ),
        max_size=3,
        unique_by=lambda kv: kv[0],
    ),
)
def test_trace_context_round_trips_through_metadata(
    trace_id: int, span_id: int, sampled: bool, state: list[tuple[str, str]]
) -> None:
    from opentelemetry.trace import TraceState

    original = SpanContext(trace_id, span_id, True, TraceFlags(TraceFlags.SAMPLED if sampled else 0), TraceState(state))
    restored = extract_span_context(inject_span_context(original))
    assert restored is not None
    assert (restored.trace_id, restored.span_id, restored.trace_flags) == (trace_id, span_id, original.trace_flags)
    assert list(restored.trace_state.items()) == state


@pytest.mark.parametrize(
    "header",
    [
        "",
        "garbage",
        "00-00000000000000000000000000000000-0000000000000001-01",
        "00-00000000000000000000000000000001-0000000000000000-01",
        "ff-00000000000000000000000000000001-0000000000000001-01",
        "00-00000000000000000000000000000001-0000000000000001-01-extra",
        "00-0000000000000000000000000000001-0000000000000001-01",
    ],
)
def test_a_malformed_traceparent_is_ignored(header: str) -> None:
    assert extract_span_context({TRACEPARENT: header}) is None


def test_an_invalid_context_injects_nothing() -> None:
    assert inject_span_context(SpanContext(0, 0, False)) == {}


# -- metrics ---------------------------------------------------------------------------


def test_published_counter_and_latency_histogram(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, metrics: Metrics
) -> None:
    rt = start_runtime([stage])
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    client.publish("news", 1)
    client.publish("news", 2)
    client.post(MAILBOX, 3)
    with registration.reader() as reader:
        reader.receive()
    assert metrics.values("orkeon_event_published_total") == {
        attrs_of(topic="news", source_crew="crew-a"): 2,
        attrs_of(topic="_system.post", source_crew="crew-a", target_crew="crew-b"): 1,
    }
    assert metrics.values("orkeon_event_latency_seconds") == {attrs_of(pattern="receive"): 1}


def test_publish_latency_opt_in_also_records_the_publish_patterns(
    start_runtime: StartRuntime, tracing: Tracing, metrics: Metrics
) -> None:
    rt = start_runtime([TelemetryMiddleware(tracing.provider, metrics.provider, publish_latency=True)])
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    client.publish("news", 1)
    client.post(MAILBOX, 3)
    with registration.reader() as reader:
        reader.receive()
    assert metrics.values("orkeon_event_latency_seconds") == {
        attrs_of(pattern="publish"): 1,
        attrs_of(pattern="post"): 1,
        attrs_of(pattern="receive"): 1,
    }


def test_receive_latency_is_measured_on_the_runtime_clock(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, metrics: Metrics
) -> None:
    clock = ok.VirtualClock()
    rt = start_runtime([stage], clock=clock)
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("news") as sub:
        client.publish("news", 1)
        clock.advance(2.5)
        next(sub)
    (point,) = [p for p in metrics.points("orkeon_event_latency_seconds") if p.attributes["pattern"] == "subscribe"]
    assert (point.count, point.sum) == (1, 2.5)


def test_pending_waits_gauge_per_kind(
    start_runtime: StartRuntime, stage: TelemetryMiddleware, metrics: Metrics
) -> None:
    rt = start_runtime([stage])
    rt.hub.register_mailbox(MAILBOX)
    tok = ok.CancelToken()
    waiter = rt.hub.bind("crew-b", "inbox")
    call = Background(
        lambda: waiter.wait_for(ok.WaitOnMailbox(ok.MailboxAddress.parse(MAILBOX)), ok.FOREVER, cancel=tok)
    )
    wait_until(lambda: rt.hub.pending_waits()["on_mailbox"] == 1, what="the mailbox wait to register")
    assert metrics.values("orkeon_pending_waits_total") == {
        attrs_of(kind="on_topic"): 0,
        attrs_of(kind="on_mailbox"): 1,
        attrs_of(kind="on_reply"): 0,
    }
    tok.cancel()
    with pytest.raises(ok.errors.CancelledError):
        call.get()
    assert metrics.values("orkeon_pending_waits_total")[attrs_of(kind="on_mailbox")] == 0
    rt.stop()
    assert metrics.values("orkeon_pending_waits_total") == {}  # detached: nothing observed


def test_wait_timed_out_counter(start_runtime: StartRuntime, stage: TelemetryMiddleware, metrics: Metrics) -> None:
    clock = ok.VirtualClock()
    rt = start_runtime([stage], clock=clock)
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "asker")
    request = client.request(MAILBOX, 1, timeout=60)
    assert request.correlation_id is not None
    waits = [
        Background(lambda: client.wait_for(ok.WaitOnTopic("quiet.topic"), 1)),
        Background(lambda: client.wait_for(ok.WaitOnTopic("quiet.topic"), 1)),
        Background(lambda: client.wait_for(ok.WaitOnReply(request.correlation_id), 1)),  # type: ignore[arg-type]
    ]
    wait_until(lambda: sum(rt.hub.pending_waits().values()) == 3, what="three waits to register")
    clock.advance(1)
    assert all(w.get().is_timeout for w in waits)  # type: ignore[attr-defined]
    assert metrics.values("orkeon_wait_timed_out_total") == {
        attrs_of(topic="quiet.topic"): 2,
        attrs_of(topic="_system.reply"): 1,
    }
    assert registration.depth() == 1


# -- lifecycle -------------------------------------------------------------------------


def test_one_stage_serves_one_runtime_at_a_time(start_runtime: StartRuntime, stage: TelemetryMiddleware) -> None:
    first = start_runtime([stage])
    with pytest.raises(InvalidArgumentError, match="already attached"):
        ok.Runtime.start(middleware=[stage])
    first.stop()
    start_runtime([stage])  # reusable once the other runtime stopped


def test_correlation_capacity_must_be_positive() -> None:
    with pytest.raises(InvalidArgumentError):
        TelemetryMiddleware(correlation_capacity=0)


@settings(max_examples=200, deadline=None)
@given(
    trace_id=st.integers(1, 2**128 - 1),
    span_id=st.integers(1, 2**64 - 1),
    flags=st.integers(0, 255),
)
def test_a_context_written_here_reads_back_as_the_propagator_parses_it(trace_id: int, span_id: int, flags: int) -> None:
    from opentelemetry.trace import get_current_span
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    written = inject_span_context(SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(flags)))
    parsed = get_current_span(TraceContextTextMapPropagator().extract(written)).get_span_context()
    expected = SpanContext(
        parsed.trace_id, parsed.span_id, is_remote=True, trace_flags=TraceFlags(parsed.trace_flags & TraceFlags.SAMPLED)
    )
    assert extract_span_context(written) == expected  # answered from memory
    assert extract_span_context({**written, "tracestate": "k=v"}).trace_state.get("k") == "v"  # parsed
