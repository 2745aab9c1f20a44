"""The lean span path: the telemetry stage's spans without the SDK's per-span machinery.

The SDK's own span path (``Tracer.start_span``, ``set_attribute``, ``end``) costs
30-40 µs per span, most of it in machinery that only a span processor acting on span
*start* could observe: a mutable span with its lock, a bounded copy of the attributes,
``on_start`` calls, a second read-only copy at ``end``. When the provider is an SDK
``TracerProvider`` whose processors are the SDK's ``BatchSpanProcessor`` /
``SimpleSpanProcessor`` (their ``on_start`` does nothing), :class:`LeanTracer` records
the same spans for every exporter: it asks the provider's sampler up front (the stock
samplers -- ``ALWAYS_ON``, ``ALWAYS_OFF``, ``TraceIdRatioBased``, ``ParentBased`` over
any of them -- evaluated inline with the SDK's exact rules; any other sampler is called,
and its attributes and trace state are kept), draws the ids from the provider's id
generator, sets the same trace flags, and when the operation ends hands one finished
``ReadableSpan`` to the processors' ``on_end``.

This module is the one place that reads opentelemetry-sdk internals (the tracer's
``_span_limits``, ``_instrumentation_scope``, ``_tracer_metrics``, ``_is_enabled``, the
multi-processor's ``_span_processors``, ``ParentBased``'s delegates, ``StaticSampler``'s
``_decision``, and ``opentelemetry.sdk.trace._Span`` for spans with links or errors).
:meth:`LeanTracer.plan_for` checks they are there and otherwise returns ``None`` (the
stage then takes the SDK path unchanged). ``tests/middleware/test_lean_spans.py``
compares every exported span of both paths for each stock sampler; ``pyproject.toml``
bounds ``opentelemetry-sdk`` below the next minor release that test has not seen.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Final

import attrs
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace import _Span as SdkSpan
from opentelemetry.sdk.trace._tracer_metrics import NoOpTracerMetrics
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, StaticSampler, TraceIdRatioBased
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)
from opentelemetry.util.types import AnyValue, Attributes

__all__ = ["LeanTracer", "SamplingVerdict", "context_of", "ids_choosable", "refuse_span", "root_flags", "start_root_as"]


def context_of(span_context: SpanContext) -> Context:
    return trace.set_span_in_context(NonRecordingSpan(span_context))


_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED: Final = TraceFlags(TraceFlags.DEFAULT)
_SAMPLED_RANDOM: Final = TraceFlags(TraceFlags.SAMPLED | TraceFlags.RANDOM_TRACE_ID)
_NOT_SAMPLED_RANDOM: Final = TraceFlags(TraceFlags.RANDOM_TRACE_ID)
_PLAIN_PROCESSORS: Final = (BatchSpanProcessor, SimpleSpanProcessor)
"""Span processors whose ``on_start`` and ``_on_ending`` do nothing: a span they receive
only at ``on_end`` is indistinguishable, for them, from one they saw start."""
_TRACE_ID_LIMIT: Final = TraceIdRatioBased.TRACE_ID_LIMIT


@attrs.frozen
class SamplingVerdict:
    """A sampler's verdict on one span the lean recorder is about to record."""

    sampled: bool
    recording: bool
    attributes: Attributes
    trace_state: TraceState | None
    fast: bool
    """True when the verdict came from a stock sampler evaluated inline (the span's
    attributes are then exactly the stage's own)."""


_TRACER_INTERNALS: Final = (
    "_is_enabled",
    "_tracer_metrics",
    "_span_limits",
    "_instrumentation_scope",
    "instrumentation_info",
    "span_processor",
    "sampler",
    "resource",
    "id_generator",
)
_PARENT_BASED_INTERNALS: Final = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)


def _internals_known(tracer: SdkTracer) -> bool:
    """Whether the SDK internals the lean path reads are there (tracer, multi-processor,
    stock samplers)."""
    if not all(hasattr(tracer, name) for name in _TRACER_INTERNALS):
        return False
    return hasattr(tracer.span_processor, "_span_processors") and _sampler_known(tracer.sampler)


def _sampler_known(sampler: Sampler) -> bool:
    should_sample = type(sampler).should_sample
    if should_sample is ParentBased.should_sample:
        parts = [getattr(sampler, name, None) for name in _PARENT_BASED_INTERNALS]
        return all(isinstance(part, Sampler) and _sampler_known(part) for part in parts)
    if should_sample is StaticSampler.should_sample:
        return isinstance(getattr(sampler, "_decision", None), Decision)
    return True  # TraceIdRatioBased is read through its public ``bound``; others are called


class LeanTracer:
    """Records the stage's spans without the SDK's per-span machinery, for a provider
    where that is indistinguishable from the SDK's own path (see :meth:`plan_for`).

    What the SDK's ``Tracer.start_span`` / ``Span.end`` do for one span, and what this
    keeps: the sampler's decision (stock samplers -- ``ALWAYS_ON``, ``ALWAYS_OFF``,
    ``TraceIdRatioBased``, ``ParentBased`` over any of them -- are evaluated inline with
    the SDK's exact rules; any other sampler is called through ``should_sample`` and its
    attributes and trace state are honoured), the id generator (``RandomIdGenerator`` is
    ``random.getrandbits``, as in the SDK; any other is called), the trace flags
    (sampled, random-trace-id), the parent, the resource and instrumentation scope, and
    the hand-off of a finished ``ReadableSpan`` to the provider's span processors
    (``on_end``). What it skips is what those processors cannot observe: a mutable span
    object, its lock, its bounded attribute copy, and ``on_start``.

    Spans with links (replies) or an error, and spans of a non-stock sampler, are built
    as real SDK spans (``opentelemetry.sdk.trace._Span``) after the fact, with the ids
    and start time chosen up front, so span limits, events and status are the SDK's.
    """

    __slots__ = ("on_end", "plain", "processors", "random_ids", "random_trace_ids", "resource", "sampler", "tracer")

    def __init__(self, tracer: SdkTracer, processors: tuple[object, ...]) -> None:
        self.tracer = tracer
        self.processors = processors
        self.sampler = tracer.sampler
        self.resource = tracer.resource
        self.on_end = tracer.span_processor.on_end
        self.random_ids = type(tracer.id_generator) is RandomIdGenerator
        self.random_trace_ids = tracer.id_generator.is_trace_id_random()
        limits = tracer._span_limits
        self.plain = limits.max_attribute_length is None and (
            limits.max_span_attributes is None or limits.max_span_attributes >= 16
        )

    @staticmethod
    def plan_for(tracer: object) -> LeanTracer | None:
        """A lean recorder for ``tracer``, or ``None`` when the SDK path must be taken:
        not an SDK tracer (no-op or proxy provider), an SDK whose internals differ from
        those this path reads (written against opentelemetry-sdk 1.45; the tests fail if
        the installed SDK does not take the lean path), tracer disabled by its
        configurator, the SDK's own tracer metrics enabled, or a span processor other
        than the SDK's batch and simple processors (one that might act on span start)."""
        if type(tracer) is not SdkTracer or not _internals_known(tracer) or not tracer._is_enabled():
            return None
        if not isinstance(tracer._tracer_metrics, NoOpTracerMetrics):
            return None
        processor = tracer.span_processor
        if type(processor) is not SynchronousMultiSpanProcessor:
            return None
        processors = processor._span_processors
        if not all(type(p) in _PLAIN_PROCESSORS for p in processors):
            return None
        return LeanTracer(tracer, processors)

    def still_valid(self, tracer: object) -> bool:
        t = self.tracer
        return (
            tracer is t
            and t.span_processor._span_processors is self.processors
            and t.sampler is self.sampler
            and t.resource is self.resource
            and t._is_enabled()
        )

    def new_trace_id(self) -> int:
        if self.random_ids:
            trace_id = random.getrandbits(128)
            while not trace_id:
                trace_id = random.getrandbits(128)
            return trace_id
        return self.tracer.id_generator.generate_trace_id()

    def new_span_id(self) -> int:
        if self.random_ids:
            span_id = random.getrandbits(64)
            while not span_id:
                span_id = random.getrandbits(64)
            return span_id
        return self.tracer.id_generator.generate_span_id()

    def decide(
        self,
        parent: SpanContext | None,
        trace_id: int,
        name: str,
        kind: SpanKind,
        attributes_of: Callable[[], dict[str, str]],
        links: Sequence[Link] | None,
    ) -> SamplingVerdict:
        """The sampler's decision, with the SDK's semantics (see the class doc).
        ``attributes_of()`` builds the span's attributes; it is called only when a
        sampler needs them (a non-stock one) or the span will be recorded."""
        sampler: Sampler = self.sampler
        while True:
            kind_of = type(sampler).should_sample
            if kind_of is ParentBased.should_sample:
                based = sampler
                assert isinstance(based, ParentBased)
                if parent is None:
                    sampler = based._root
                elif parent.is_remote:
                    sampler = (
                        based._remote_parent_sampled if parent.trace_flags.sampled else based._remote_parent_not_sampled
                    )
                else:
                    sampler = (
                        based._local_parent_sampled if parent.trace_flags.sampled else based._local_parent_not_sampled
                    )
                continue
            if kind_of is StaticSampler.should_sample:
                assert isinstance(sampler, StaticSampler)
                decision = sampler._decision
            elif kind_of is TraceIdRatioBased.should_sample:
                assert isinstance(sampler, TraceIdRatioBased)
                decision = Decision.RECORD_AND_SAMPLE if trace_id & _TRACE_ID_LIMIT < sampler.bound else Decision.DROP
            else:
                result = sampler.should_sample(
                    None if parent is None else context_of(parent), trace_id, name, kind, attributes_of(), links
                )
                return SamplingVerdict(
                    result.decision is Decision.RECORD_AND_SAMPLE,
                    result.decision is not Decision.DROP,
                    result.attributes,
                    result.trace_state,
                    False,
                )
            return SamplingVerdict(
                decision is Decision.RECORD_AND_SAMPLE,
                decision is not Decision.DROP,
                None if decision is Decision.DROP else attributes_of(),
                None if parent is None else parent.trace_state,
                True,
            )

    def span_context(self, parent: SpanContext | None, trace_id: int, decision: SamplingVerdict) -> SpanContext:
        """The context of the span about to be recorded (as the SDK builds it)."""
        random_trace = self.random_trace_ids if parent is None else parent.trace_flags.random_trace_id
        if decision.sampled:
            flags = _SAMPLED_RANDOM if random_trace else _SAMPLED
        else:
            flags = _NOT_SAMPLED_RANDOM if random_trace else _NOT_SAMPLED
        return SpanContext(trace_id, self.new_span_id(), False, flags, decision.trace_state)

    def finish(
        self,
        name: str,
        kind: SpanKind,
        span_context: SpanContext,
        parent: SpanContext | None,
        decision: SamplingVerdict,
        links: Sequence[Link] | None,
        start_ns: int,
        outcome: str,
        error: BaseException | None = None,
    ) -> None:
        """Hand the finished span to the span processors (nothing when not recording)."""
        if not decision.recording:
            return
        if decision.fast and self.plain and not links and error is None:
            attributes: dict[str, AnyValue] = dict(decision.attributes or {})
            attributes["event.outcome"] = outcome
            self.on_end(
                ReadableSpan(
                    name=name,
                    context=span_context,
                    parent=parent,
                    resource=self.resource,
                    attributes=attributes,
                    kind=kind,
                    instrumentation_info=self.tracer.instrumentation_info,
                    start_time=start_ns,
                    end_time=time.time_ns(),
                    instrumentation_scope=self.tracer._instrumentation_scope,
                )
            )
            return
        tracer = self.tracer
        span = SdkSpan(
            name=name,
            context=span_context,
            parent=parent,
            sampler=self.sampler,
            resource=self.resource,
            attributes=decision.attributes,
            span_processor=tracer.span_processor,
            kind=kind,
            links=links or (),
            instrumentation_info=tracer.instrumentation_info,
            record_exception=False,
            set_status_on_exception=False,
            limits=tracer._span_limits,
            instrumentation_scope=tracer._instrumentation_scope,
        )
        span.start(start_time=start_ns, parent_context=None if parent is None else context_of(parent))
        if error is not None:
            refuse_span(span, outcome, error)
            return
        span.set_attribute("event.outcome", outcome)
        span.end()


def refuse_span(span: Span, outcome: str, error: BaseException) -> None:
    span.set_attribute("event.outcome", outcome)
    span.set_attribute("error.type", type(error).__name__)
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.end()


def ids_choosable(tracer: object) -> bool:
    """Whether :func:`start_root_as` can give ``tracer``'s spans ids chosen up front: an
    enabled SDK tracer whose internals are the ones this module reads."""
    return type(tracer) is SdkTracer and _internals_known(tracer) and tracer._is_enabled()


def root_flags(tracer: SdkTracer, trace_id: int, name: str, kind: SpanKind, attributes: Attributes) -> TraceFlags:
    """The trace flags ``tracer``'s sampler gives a root span of ``trace_id``."""
    result = tracer.sampler.should_sample(None, trace_id, name, kind, attributes)
    return _SAMPLED if result.decision is Decision.RECORD_AND_SAMPLE else _NOT_SAMPLED


def start_root_as(
    tracer: SdkTracer, name: str, span_context: SpanContext, kind: SpanKind, attributes: Attributes, start_time: int
) -> Span:
    """Start a root span with ``span_context``'s ids (chosen up front, so spans made
    before it, elsewhere, could name it as their parent): a real SDK span given to the
    provider's processors (``on_start`` now, ``on_end`` at ``end``), or a non-recording
    one when ``span_context`` is not sampled. Only for a tracer :func:`ids_choosable`."""
    if not span_context.trace_flags.sampled:
        return NonRecordingSpan(span_context)
    result = tracer.sampler.should_sample(None, span_context.trace_id, name, kind, attributes)
    span = SdkSpan(
        name=name,
        context=span_context,
        parent=None,
        sampler=tracer.sampler,
        resource=tracer.resource,
        attributes=result.attributes,
        span_processor=tracer.span_processor,
        kind=kind,
        links=(),
        instrumentation_info=tracer.instrumentation_info,
        record_exception=False,
        set_status_on_exception=False,
        limits=tracer._span_limits,
        instrumentation_scope=tracer._instrumentation_scope,
    )
    span.start(start_time=start_time)
    return span
