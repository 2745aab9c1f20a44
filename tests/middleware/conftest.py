"""Fixtures of the middleware tests: runtimes with stages, recording stages, and
in-memory OpenTelemetry and loguru sinks."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import pytest
from loguru import logger
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import orkeon_actors as ok
from orkeon_actors.middleware import Next, current_operation


@attrs.define
class Event:
    stage: str
    path: str
    operation: str
    message: ok.Message


class Recorder:
    """A stage that records every call (stage name, path, operation, message) into a
    shared journal and passes the message on."""

    def __init__(self, name: str, journal: list[Event]) -> None:
        self.name = name
        self.journal = journal

    def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
        self.journal.append(Event(self.name, "publish", current_operation(), message))
        return next(message)

    def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
        self.journal.append(Event(self.name, "receive", current_operation(), message))
        return next(message)


StartRuntime = Callable[..., ok.Runtime]


@pytest.fixture
def start_runtime() -> Iterator[StartRuntime]:
    """``start_runtime(middleware=[...], clock=..., schema_registry=...)``: a runtime
    stopped at teardown."""
    started: list[ok.Runtime] = []

    def start(middleware: Sequence[Any] = (), **kwargs: Any) -> ok.Runtime:
        rt = ok.Runtime.start(middleware=middleware, **kwargs)
        started.append(rt)
        return rt

    yield start
    for rt in started:
        rt.stop()


class StartObserver(SpanProcessor):
    """A span processor that acts on span start (counts the spans it saw start). The
    telemetry stage cannot skip ``on_start`` for such a provider: it takes the SDK's
    own span path."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span.name)


@attrs.define
class Tracing:
    provider: TracerProvider
    exporter: InMemorySpanExporter
    observer: StartObserver | None = None

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        return [s for s in spans if name is None or s.name == name]

    def one(self, name: str) -> ReadableSpan:
        spans = self.spans(name)
        assert len(spans) == 1, f"expected one {name} span, got {[s.name for s in self.spans()]}"
        return spans[0]


@pytest.fixture(params=["lean", "sdk"])
def tracing(request: pytest.FixtureRequest) -> Iterator[Tracing]:
    """A provider exporting to memory. ``lean``: a plain simple processor, so the
    telemetry stage records spans on its lean path; ``sdk``: plus a processor observing
    span start, which makes it take the SDK's own span path. Every span test runs on
    both and must see the same spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = None
    if request.param == "sdk":
        observer = StartObserver()
        provider.add_span_processor(observer)
    yield Tracing(provider, exporter, observer)
    if observer is not None:
        assert sorted(observer.started) == sorted(s.name for s in exporter.get_finished_spans())
    provider.shutdown()


@attrs.define
class Metrics:
    provider: MeterProvider
    reader: InMemoryMetricReader

    def points(self, name: str) -> list[Any]:
        """Every data point of the metric ``name`` in one collection."""
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        if data is None:
            return points
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points

    def values(self, name: str) -> dict[frozenset[tuple[str, Any]], Any]:
        """``{frozenset(attributes): value}`` (sum/gauge value, histogram count)."""
        out: dict[frozenset[tuple[str, Any]], Any] = {}
        for point in self.points(name):
            key = frozenset(dict(point.attributes or {}).items())
            out[key] = point.count if hasattr(point, "bucket_counts") else point.value
        return out


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield Metrics(provider, reader)
    provider.shutdown()


@pytest.fixture
def log_records() -> Iterator[list[dict[str, Any]]]:
    """Every loguru record the hub's logging stage emits during the test."""
    records: list[dict[str, Any]] = []
    handler = logger.add(
        lambda m: records.append(m.record),
        level="TRACE",
        format="{message}",
        filter=lambda r: r["extra"].get("component") == "orkeon_actors.event_hub",
    )
    yield records
    logger.remove(handler)


def attrs_of(**kwargs: str) -> frozenset[tuple[str, str]]:
    return frozenset(kwargs.items())
