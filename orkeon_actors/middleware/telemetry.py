"""Stage 2, telemetry (spec §12, §14): OpenTelemetry spans and metrics for the hub.

Spans, on the tracer ``orkeon_actors.event_hub``: one per hub operation crossing the
stage, named ``event_hub.<pattern>``: ``publish``, ``post``, ``send``, ``reply`` (kind
PRODUCER, publish path, caller's thread) and ``subscribe``, ``wait``, ``receive`` (kind
CONSUMER, receive path, consumer's thread). Attributes:

==========================  =====================================================
``event.topic``             the message topic (``_system.post`` etc. for mailboxes)
``event.pattern``           the operation: publish/post/send/reply/subscribe/wait/receive
``event.message_id``        the message id
``event.correlation_id``    only when the message has one (send, reply)
``event.outcome``           ``accepted`` / ``refused`` on publish; ``consumed`` /
                            ``dropped`` / ``refused`` on receive
``crew.source``             the source crew
``crew.target``             only when the message has a target crew
``error.type``              only on a refusal (the exception type; status ERROR)
==========================  =====================================================

Trace context travels inside the message: the publish-path span's context is written
into the message metadata as W3C ``traceparent`` (and ``tracestate`` when non-empty);
the receive-path span is a child of it, so one trace follows a message across actors.
A publish-path span's parent is the caller's current span, else a ``traceparent`` the
caller put in the metadata itself, else none (a new trace).

A reply is linked to its request: ``send`` remembers, by correlation id, the context of
its span; the receive span of the request updates the entry. The ``reply`` span carries a
link to the request's ``send`` span and, unless the replier has a current span of its
own, is a child of the request's receive span (so request, receipt and reply share one
trace). The memory is bounded (``correlation_capacity``, oldest forgotten first) and an
entry is dropped when its reply passes. When the request was sent by another process,
the link comes from the request's ``traceparent``.

Metrics (spec §14.2), on the meter ``orkeon_actors.event_hub``:

* ``orkeon_event_published_total{topic, source_crew, target_crew}``: messages the
  publish path accepted (publish, post, send, reply); ``target_crew`` only when set.
  Counted in the stage and reported as an asynchronous (observable) monotonic counter:
  one lock-protected increment per message instead of the SDK's synchronous path.
* ``orkeon_event_latency_seconds{pattern}``: histogram. Publish patterns: the seconds the
  rest of the chain and the hand-off took in the caller's thread (``time.perf_counter``:
  a cost, real time even under a virtual clock). Receive patterns: the seconds from
  ``published_at`` to consumption, on the runtime's clock (virtual under a virtual
  clock).
* ``orkeon_pending_waits_total{kind}``: observable gauge of the waits blocked right now,
  per kind (``on_topic``, ``on_mailbox``, ``on_reply``), read from ``hub.pending_waits()``
  of the runtime the stage is attached to.
* ``orkeon_wait_timed_out_total{topic}``: waits that expired (finite timeouts), labelled
  with the waited topic or mailbox; waits on a reply are labelled ``_system.reply``
  (a correlation id would make one series per request).

How spans are recorded: through the SDK (``Tracer.start_span``), or, when the provider is
one where that is indistinguishable, through the lean span path of
:mod:`orkeon_actors.middleware.lean_spans` (same spans, same processors, a fraction of
the cost; see there for when it applies and how it is kept honest).

Trace context is written and read with OpenTelemetry's W3C propagator
(``TraceContextTextMapPropagator``): its rules decide what a valid ``traceparent`` is.

One stage serves one runtime at a time (``attach`` raises while it is attached to
another). Give each runtime its own stage and, if they share a MeterProvider, know that
the OTel SDK keeps the first registration of an instrument name: use one MeterProvider
per runtime, or one runtime.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Final

import attrs
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    TraceFlags,
    TracerProvider,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from orkeon_actors.errors import DuplicateMessageError, InvalidArgumentError
from orkeon_actors.hub.pipeline import (
    PUBLISH_OPERATIONS,
    RECEIVE_OPERATIONS,
    MiddlewareContext,
    Next,
    current_operation,
)
from orkeon_actors.hub.port import EventHub
from orkeon_actors.middleware.lean_spans import LeanTracer, context_of, refuse_span
from orkeon_actors.model.clock import Clock, SystemClock
from orkeon_actors.model.message import Message

__all__ = [
    "TelemetryMiddleware",
    "INSTRUMENTATION_NAME",
    "TRACEPARENT",
    "TRACESTATE",
    "extract_span_context",
    "inject_span_context",
]

INSTRUMENTATION_NAME: Final = "orkeon_actors.event_hub"
"""Name of the tracer and of the meter the stage uses."""
TRACEPARENT: Final = "traceparent"
"""Metadata key carrying the W3C trace context of the span that published a message."""
TRACESTATE: Final = "tracestate"

REPLY_TIMEOUT_LABEL: Final = "_system.reply"

_SPAN_NAMES = {op: f"event_hub.{op}" for op in (*PUBLISH_OPERATIONS, *RECEIVE_OPERATIONS)}
_PATTERN_ATTRS = {op: {"pattern": op} for op in (*PUBLISH_OPERATIONS, *RECEIVE_OPERATIONS)}
_REQUEST_LINK_ATTRS = {"event.link": "request"}
_ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}\Z")


_PROPAGATOR: Final = TraceContextTextMapPropagator()


class _MetadataGetter(Getter[Mapping[str, str]]):
    """How the propagator reads a message's metadata: one string per key (the default
    getter's ``isinstance(value, typing.Iterable)`` test costs more than the parse)."""

    def get(self, carrier: Mapping[str, str], key: str) -> list[str] | None:
        value = carrier.get(key)
        return None if value is None else [value]

    def keys(self, carrier: Mapping[str, str]) -> list[str]:
        return list(carrier)


_GETTER: Final = _MetadataGetter()
_EMPTY_CONTEXT: Final = Context()


class _WrittenContexts:
    """The span contexts this process wrote into messages, by their ``traceparent``, as
    :func:`extract_span_context` reads them back (remote, only the sampled flag): a
    message published and consumed in this process is not parsed again on receive.

    Bounded (``capacity`` entries, oldest forgotten first; a message consumed after its
    entry was forgotten is parsed by the propagator, with the same result). Only
    contexts without a trace state are kept, so the ``traceparent`` alone is the key.
    Safe across threads: each operation is one C-level ``OrderedDict`` call."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, SpanContext] = OrderedDict()

    def remember(self, traceparent: str, span_context: SpanContext) -> None:
        entries = self._entries
        entries[traceparent] = SpanContext(
            span_context.trace_id,
            span_context.span_id,
            is_remote=True,
            trace_flags=_SAMPLED if span_context.trace_flags.sampled else _NOT_SAMPLED,
        )
        if len(entries) > self._capacity:
            entries.popitem(last=False)

    def get(self, traceparent: str) -> SpanContext | None:
        return self._entries.get(traceparent)


_WRITTEN_CAPACITY: Final = 16_384
_WRITTEN: Final = _WrittenContexts(_WRITTEN_CAPACITY)
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED: Final = TraceFlags(TraceFlags.DEFAULT)


def inject_span_context(span_context: SpanContext) -> dict[str, str]:
    """The metadata entries carrying ``span_context`` (W3C Trace Context, written by
    OpenTelemetry's propagator): ``traceparent``, plus ``tracestate`` when the trace
    state is not empty. Empty for an invalid context."""
    carrier: dict[str, str] = {}
    if span_context.is_valid:
        _PROPAGATOR.inject(carrier, context_of(span_context))
        if TRACESTATE not in carrier:
            _WRITTEN.remember(carrier[TRACEPARENT], span_context)
    return carrier


def extract_span_context(metadata: Mapping[str, str]) -> SpanContext | None:
    """The remote span context carried by ``metadata`` (``traceparent`` /
    ``tracestate``, read by OpenTelemetry's propagator), or ``None`` when absent or
    invalid by W3C Trace Context's rules. Only the *sampled* flag is kept, as a context
    carried inside a message has always been read here. A ``traceparent`` this process
    wrote (and no ``tracestate``) is answered from memory: the context the propagator
    wrote it from, as it would parse it back."""
    traceparent = metadata.get(TRACEPARENT)
    if traceparent is None:
        return None
    if TRACESTATE not in metadata and (written := _WRITTEN.get(traceparent)) is not None:
        return written  # what the propagator wrote here, read back without parsing
    span_context = trace.get_current_span(_PROPAGATOR.extract(metadata, _EMPTY_CONTEXT, _GETTER)).get_span_context()
    if not span_context.is_valid:
        return None
    if span_context.trace_flags & ~TraceFlags.SAMPLED:
        return SpanContext(
            span_context.trace_id,
            span_context.span_id,
            is_remote=True,
            trace_flags=TraceFlags(span_context.trace_flags & TraceFlags.SAMPLED),
            trace_state=span_context.trace_state,
        )
    return span_context


@attrs.define
class _Request:
    """What the stage knows about a request awaiting its reply."""

    producer: SpanContext | None = None
    consumer: SpanContext | None = None


class _RequestContexts:
    """Bounded ``correlation id -> _Request`` map, oldest forgotten first. Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, _Request] = OrderedDict()
        self._lock = threading.Lock()

    def update(self, correlation_id: str, producer: SpanContext | None, consumer: SpanContext | None) -> None:
        with self._lock:
            entry = self._entries.get(correlation_id)
            if entry is None:
                entry = self._entries[correlation_id] = _Request()
                if len(self._entries) > self._capacity:
                    self._entries.popitem(last=False)
            if producer is not None and entry.producer is None:
                entry.producer = producer
            if consumer is not None:
                entry.consumer = consumer

    def pop(self, correlation_id: str) -> _Request | None:
        with self._lock:
            return self._entries.pop(correlation_id, None)

    def __len__(self) -> int:
        return len(self._entries)


def _current_parent() -> SpanContext | None:
    span_context = trace.get_current_span().get_span_context()
    return span_context if span_context.is_valid else None


class TelemetryMiddleware:
    """OpenTelemetry spans and metrics for every message crossing the stage (see the
    module docstring for the exact names, attributes and semantics).

    ``tracer_provider`` / ``meter_provider``: where spans and metrics go; ``None`` (the
    default) uses the global providers (``opentelemetry.trace.set_tracer_provider`` /
    ``opentelemetry.metrics.set_meter_provider``), which are no-ops until you set them.
    ``correlation_capacity``: how many pending requests the stage remembers to link
    replies (positive; ``InvalidArgumentError`` otherwise). By default
    ``orkeon_event_latency_seconds`` is recorded once per message, on receive (from
    ``published_at``); ``publish_latency=True`` also records it for the publish patterns
    (the hand-off time), which doubles the stage's metrics cost.

    The stage never swallows an error: a refusal ends the span with status ERROR and the
    error's type in ``error.type``, then propagates unchanged. Adding ``traceparent`` to
    the metadata means the message returned by publish/post/send/reply (and the one
    consumers receive) carries that key.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        *,
        correlation_capacity: int = 10_000,
        publish_latency: bool = False,
    ) -> None:
        if (
            isinstance(correlation_capacity, bool)
            or not isinstance(correlation_capacity, int)
            or correlation_capacity < 1
        ):
            raise InvalidArgumentError(f"correlation_capacity must be a positive integer, got {correlation_capacity!r}")
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=meter_provider)
        self._published: dict[tuple[str, str, str | None], int] = {}
        self._published_lock = threading.Lock()
        meter.create_observable_counter(
            "orkeon_event_published_total",
            callbacks=[self._observe_published],
            unit="{message}",
            description="Messages accepted by the hub's publish path (publish, post, send, reply)",
        )
        self._latency = meter.create_histogram(
            "orkeon_event_latency_seconds",
            unit="s",
            description="Publish patterns: time to accept and hand off; receive patterns: publication to consumption",
        )
        meter.create_observable_gauge(
            "orkeon_pending_waits_total",
            callbacks=[self._observe_pending_waits],
            unit="{wait}",
            description="Waits currently blocked on the hub, per kind",
        )
        self._timed_out = meter.create_counter(
            "orkeon_wait_timed_out_total",
            unit="{wait}",
            description="Finite waits that expired (WaitTimedOutMessage emitted)",
        )
        self._requests = _RequestContexts(correlation_capacity)
        self._publish_latency = publish_latency
        self._lean_tracer: LeanTracer | None = None
        self._sdk_only: object = None
        self._hub: EventHub | None = None
        self._clock: Clock = SystemClock()

    # -- lifecycle ---------------------------------------------------------------------

    def attach(self, context: MiddlewareContext) -> None:
        """Observe ``context.hub`` (pending waits) and measure receive latency on
        ``context.clock``. Raises ``InvalidArgumentError`` if already attached to
        another hub."""
        if self._hub is not None and self._hub is not context.hub:
            raise InvalidArgumentError(
                "this TelemetryMiddleware is already attached to a running runtime; give each runtime "
                "its own stage (stop the other runtime first to reuse this one)"
            )
        self._hub = context.hub
        self._clock = context.clock

    def detach(self) -> None:
        """Stop observing the hub (the pending-waits gauge reports nothing until the
        next ``attach``)."""
        self._hub = None
        self._clock = SystemClock()

    # -- the two paths -----------------------------------------------------------------

    def _lean(self) -> LeanTracer | None:
        """The lean recorder for the current tracer, or ``None`` for the SDK path;
        re-planned when the provider's processors, sampler or resource change."""
        tracer = self._tracer
        lean = self._lean_tracer
        if lean is not None and lean.still_valid(tracer):
            return lean
        if tracer is self._sdk_only:
            return None
        lean = self._lean_tracer = LeanTracer.plan_for(tracer)
        self._sdk_only = tracer if lean is None else None
        return lean

    def on_publish(self, message: Message, next: Next) -> Message:
        """Span the operation, write its context into the metadata, count and time it."""
        lean = self._lean()
        if lean is None:
            return self._publish_sdk(message, next)
        operation = current_operation()
        name = _SPAN_NAMES.get(operation, "event_hub")
        parent = _current_parent()
        if parent is None:
            parent = extract_span_context(message.metadata)
        links: list[Link] | None = None
        correlation_id = message.correlation_id
        if operation == "reply" and correlation_id is not None:
            request = self._requests.pop(correlation_id)
            if request is not None:
                if request.producer is not None:
                    links = [Link(request.producer, _REQUEST_LINK_ATTRS)]
                if parent is None:
                    parent = request.consumer or request.producer
        trace_id = lean.new_trace_id() if parent is None else parent.trace_id
        decision = lean.decide(
            parent, trace_id, name, SpanKind.PRODUCER, partial(_attributes, message, operation), links
        )
        span_context = lean.span_context(parent, trace_id, decision)
        message = message.with_metadata(inject_span_context(span_context))
        start_ns = time.time_ns()
        started = time.perf_counter()
        try:
            result = next(message)
        except BaseException as exc:
            lean.finish(name, SpanKind.PRODUCER, span_context, parent, decision, links, start_ns, "refused", exc)
            raise
        elapsed = time.perf_counter() - started
        lean.finish(name, SpanKind.PRODUCER, span_context, parent, decision, links, start_ns, "accepted")
        self._after_publish(operation, result, elapsed, correlation_id, span_context)
        return result

    def on_receive(self, message: Message, next: Next) -> Message:
        """Span the consumption as a child of the publishing span; record its latency."""
        lean = self._lean()
        if lean is None:
            return self._receive_sdk(message, next)
        operation = current_operation()
        name = _SPAN_NAMES.get(operation, "event_hub")
        producer = extract_span_context(message.metadata)
        parent = producer if producer is not None else _current_parent()
        trace_id = lean.new_trace_id() if parent is None else parent.trace_id
        decision = lean.decide(
            parent, trace_id, name, SpanKind.CONSUMER, partial(_attributes, message, operation), None
        )
        span_context = lean.span_context(parent, trace_id, decision)
        start_ns = time.time_ns()
        try:
            result = next(message)
        except DuplicateMessageError:
            lean.finish(name, SpanKind.CONSUMER, span_context, parent, decision, None, start_ns, "dropped")
            raise
        except BaseException as exc:
            lean.finish(name, SpanKind.CONSUMER, span_context, parent, decision, None, start_ns, "refused", exc)
            raise
        lean.finish(name, SpanKind.CONSUMER, span_context, parent, decision, None, start_ns, "consumed")
        self._after_receive(operation, message, producer, span_context)
        return result

    def _after_publish(
        self, operation: str, result: Message, elapsed: float, correlation_id: str | None, span_context: SpanContext
    ) -> None:
        if self._publish_latency:
            self._latency.record(elapsed, _PATTERN_ATTRS.get(operation))
        key = (
            result.topic,
            str(result.source_crew_id),
            None if result.target_crew_id is None else str(result.target_crew_id),
        )
        with self._published_lock:
            self._published[key] = self._published.get(key, 0) + 1
        if operation == "send" and correlation_id is not None and span_context.is_valid:
            self._requests.update(correlation_id, span_context, None)

    def _after_receive(
        self, operation: str, message: Message, producer: SpanContext | None, span_context: SpanContext
    ) -> None:
        latency = (self._clock.now() - message.published_at).total_seconds()
        self._latency.record(latency, _PATTERN_ATTRS.get(operation))
        correlation_id = message.correlation_id
        if correlation_id is not None:
            self._requests.update(correlation_id, producer, span_context if span_context.is_valid else None)

    # -- the SDK path (providers the lean recorder cannot stand in for) ----------------

    def _publish_sdk(self, message: Message, next: Next) -> Message:
        operation = current_operation()
        parent: Context | None = None
        links: list[Link] | None = None
        has_current = trace.get_current_span().get_span_context().is_valid
        if not has_current:
            carried = extract_span_context(message.metadata)
            if carried is not None:
                parent = context_of(carried)
        correlation_id = message.correlation_id
        if operation == "reply" and correlation_id is not None:
            request = self._requests.pop(correlation_id)
            if request is None:
                request = _Request()
            if request.producer is not None:
                links = [Link(request.producer, _REQUEST_LINK_ATTRS)]
            anchor = request.consumer or request.producer
            if anchor is not None and parent is None and not has_current:
                parent = context_of(anchor)
        span = self._tracer.start_span(
            _SPAN_NAMES.get(operation, "event_hub"),
            context=parent,
            kind=SpanKind.PRODUCER,
            attributes=_attributes(message, operation),
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        )
        span_context = span.get_span_context()
        if span_context.is_valid:
            message = message.with_metadata(inject_span_context(span_context))
        started = time.perf_counter()
        try:
            result = next(message)
        except BaseException as exc:
            refuse_span(span, "refused", exc)
            raise
        elapsed = time.perf_counter() - started
        span.set_attribute("event.outcome", "accepted")
        span.end()
        self._after_publish(operation, result, elapsed, correlation_id, span_context)
        return result

    def _receive_sdk(self, message: Message, next: Next) -> Message:
        operation = current_operation()
        producer = extract_span_context(message.metadata)
        span = self._tracer.start_span(
            _SPAN_NAMES.get(operation, "event_hub"),
            context=None if producer is None else context_of(producer),
            kind=SpanKind.CONSUMER,
            attributes=_attributes(message, operation),
            record_exception=False,
            set_status_on_exception=False,
        )
        try:
            result = next(message)
        except DuplicateMessageError:
            span.set_attribute("event.outcome", "dropped")
            span.end()
            raise
        except BaseException as exc:
            refuse_span(span, "refused", exc)
            raise
        span.set_attribute("event.outcome", "consumed")
        span.end()
        self._after_receive(operation, message, producer, span.get_span_context())
        return result

    # -- hub notifications -------------------------------------------------------------

    def on_wait_timed_out(self, message: Message) -> None:
        """Count an expired wait (called by the pipeline with each WaitTimedOutMessage)."""
        original = message.metadata.get("original_topic", "")
        label = REPLY_TIMEOUT_LABEL if _ULID_RE.match(original) else original
        self._timed_out.add(1, {"topic": label})

    # -- observable instruments --------------------------------------------------------

    def _observe_published(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._published_lock:
            counts = list(self._published.items())
        observations = []
        for (topic, source, target), value in counts:
            attributes = {"topic": topic, "source_crew": source}
            if target is not None:
                attributes["target_crew"] = target
            observations.append(Observation(value, attributes))
        return observations

    def _observe_pending_waits(self, options: CallbackOptions) -> Iterable[Observation]:
        hub = self._hub
        if hub is None:
            return []
        return [Observation(count, {"kind": kind}) for kind, count in hub.pending_waits().items()]

    def pending_request_links(self) -> int:
        """How many requests the stage currently remembers for reply linking."""
        return len(self._requests)

    def __repr__(self) -> str:
        return f"TelemetryMiddleware(attached={self._hub is not None})"


def _attributes(message: Message, operation: str) -> dict[str, str]:
    attributes = {
        "event.topic": message.topic,
        "event.pattern": operation,
        "event.message_id": str(message.id),
        "crew.source": str(message.source_crew_id),
    }
    if message.target_crew_id is not None:
        attributes["crew.target"] = str(message.target_crew_id)
    if message.correlation_id is not None:
        attributes["event.correlation_id"] = str(message.correlation_id)
    return attributes
