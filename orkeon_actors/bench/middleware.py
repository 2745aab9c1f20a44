"""The five middleware stages as ``orkeon bench hub`` runs them, and their own costs.

:class:`FiveStages` builds logging, telemetry, ACL, idempotency and validation in the
spec's order, in one of two profiles (:class:`Profile`), with sinks that keep everything
in memory:

* loguru: every handler is replaced, for the duration, by one sink at the profile's
  level that formats each record it accepts as ``{message}`` and discards it; leaving
  restores loguru's default handler (stderr). The stage logs at ``DEBUG``: the *full*
  profile's sink (``DEBUG``) formats every record, the *production* profile's (``INFO``)
  none;
* OpenTelemetry: a ``TracerProvider`` with the profile's sampler (*full*: the SDK's
  default, every span; *production*: ``ParentBased(TraceIdRatioBased(0.01))``) whose
  ``BatchSpanProcessor`` (queue sized so that no span is ever dropped) feeds an
  ``InMemorySpanExporter``, and a ``MeterProvider`` with an ``InMemoryMetricReader``
  (the §14.2 instruments on in both profiles; the production profile records the
  latency histogram once per message, on receive); :meth:`FiveStages.settle` flushes the spans and collects the
  metrics (the bench calls it inside its timed window), :meth:`FiveStages.take_exported_spans`
  counts what was exported;
* ACL: the permissive policy with both bench crews registered (so every decision walks
  the registry, as in production).

:func:`stage_costs_us` times each stage alone: N pre-built mailbox messages through a
one-stage pipeline (publish chain ``post`` ending in a no-op delivery, then receive chain
``receive``), in one thread, then the sinks settled (spans flushed, metrics collected),
best of ``repeats``. A stage's figure is that time minus the
same loop through a pass-through stage (so it is the stage's own work, not the pipeline's
call overhead, reported separately as ``passthrough``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Final

import attrs
from loguru import logger
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler, TraceIdRatioBased

from orkeon_actors.acl import AclMiddleware, AclRegistry
from orkeon_actors.bench.context import restore_logging
from orkeon_actors.middleware import (
    EventHubMiddleware,
    IdempotencyMiddleware,
    LoggingMiddleware,
    Next,
    Pipeline,
    ValidationMiddleware,
)
from orkeon_actors.middleware.telemetry import TelemetryMiddleware
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.clock import SystemClock
from orkeon_actors.model.ids import CrewId, MessageId
from orkeon_actors.model.message import Message

__all__ = ["FULL", "PRODUCTION", "PRODUCTION_FULL_SAMPLING", "STAGE_NAMES", "FiveStages", "Profile", "stage_costs_us"]

STAGE_NAMES = ("logging", "telemetry", "acl", "idempotency", "validation")
SENDER = "bench-sender"
RECEIVER = "bench-receiver"
MAILBOX = f"agent://{RECEIVER}/consumer"
_SPAN_QUEUE = 2_000_000


class _PassThrough:
    def on_publish(self, message: Message, next: Next) -> Message:
        return next(message)

    def on_receive(self, message: Message, next: Next) -> Message:
        return next(message)


@attrs.frozen
class Profile:
    """How the five stages are configured: the loguru sink's level, the tracer's
    sampler, and whether the latency histogram is also recorded on the publish half."""

    name: str
    sink_level: str
    sampler: Sampler
    publish_latency: bool


FULL: Final = Profile("full", "DEBUG", ParentBased(ALWAYS_ON), publish_latency=True)
"""Full fidelity: every DEBUG record formatted, every span exported (reported, not targeted)."""
PRODUCTION: Final = Profile("production", "INFO", ParentBased(TraceIdRatioBased(0.01)), publish_latency=False)
"""What users run: the sink at INFO, 1% parent-based sampling, the §14.2 metrics on."""
PRODUCTION_FULL_SAMPLING: Final = Profile(
    "production_full_sampling", "INFO", ParentBased(ALWAYS_ON), publish_latency=False
)
"""The production profile with every trace sampled (the peer comparison at 100%)."""


class FiveStages:
    """The five stages with in-memory sinks; a context manager (see the module doc)."""

    def __init__(self, profile: Profile = FULL) -> None:
        self.profile = profile
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(sampler=profile.sampler)
        self.tracer_provider.add_span_processor(
            BatchSpanProcessor(self.exporter, max_queue_size=_SPAN_QUEUE, max_export_batch_size=512)
        )
        self.metric_reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metric_reader])
        registry = AclRegistry()
        registry.register_crew(SENDER, SENDER)
        registry.register_crew(RECEIVER, RECEIVER)
        self.by_name: dict[str, EventHubMiddleware] = {
            "logging": LoggingMiddleware(),
            "telemetry": TelemetryMiddleware(
                self.tracer_provider, self.meter_provider, publish_latency=profile.publish_latency
            ),
            "acl": AclMiddleware(registry),
            "idempotency": IdempotencyMiddleware(),
            "validation": ValidationMiddleware(),
        }
        self.stages: list[EventHubMiddleware] = [self.by_name[name] for name in STAGE_NAMES]
        self._sink: int | None = None

    def __enter__(self) -> FiveStages:
        logger.remove()
        self._sink = logger.add(lambda _message: None, level=self.profile.sink_level, format="{message}")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._sink is not None:
            logger.remove(self._sink)
            self._sink = None
            restore_logging()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    def settle(self) -> None:
        """Finish the work the sinks deferred: flush the span processor (every span
        queued so far is exported when this returns) and collect the metrics once (the
        observable instruments' callbacks run). The bench calls it before its clock
        stops, so deferred work is timed."""
        if not self.tracer_provider.force_flush():
            raise RuntimeError("the span processor did not flush within its timeout: spans would be lost")
        self.metric_reader.get_metrics_data()

    def take_exported_spans(self) -> int:
        """How many spans were exported since the last call (then forgotten, so the
        exporter does not grow over a long bench)."""
        count = len(self.exporter.get_finished_spans())
        self.exporter.clear()
        return count


def _messages(count: int) -> list[Message]:
    now = SystemClock().now()
    mailbox = MailboxAddress.parse(MAILBOX)
    sender, receiver = CrewId(SENDER), CrewId(RECEIVER)
    return [
        Message(
            MessageId.new(), "_system.post", sender, now, b'{"n":1}', target_crew_id=receiver, target_mailbox=mailbox
        )
        for _ in range(count)
    ]


def _loop_us(stage: EventHubMiddleware, messages: Sequence[Message], settle: Callable[[], None]) -> float:
    pipeline = Pipeline([stage])
    publish = pipeline.publish_chain("post", lambda message: message)
    receive = pipeline.receive_chain("receive")
    assert receive is not None
    started = time.perf_counter()
    for message in messages:
        receive(publish(message))
    settle()
    return (time.perf_counter() - started) / len(messages) * 1e6


def stage_costs_us(
    stages: Sequence[EventHubMiddleware],
    count: int,
    repeats: int,
    settle: Callable[[], None] = lambda: None,
    extra: Mapping[str, EventHubMiddleware] | None = None,
) -> dict[str, float]:
    """µs per message of each of ``stages`` (named as :data:`STAGE_NAMES`, in order)
    alone, minus a pass-through stage; ``passthrough`` is the pass-through's own cost.
    ``settle`` runs at the end of every timed loop (the pass-through's too), so work a
    sink deferred (span export) is part of the stage's figure.

    Each repeat uses fresh message ids (the idempotency stage must see first
    consumptions); the best (lowest) of ``repeats`` is kept. ``extra`` stages are timed
    the same way, under their own names."""
    passthrough = _PassThrough()
    costs: dict[str, float] = {}
    baseline = min(_loop_us(passthrough, _messages(count), settle) for _ in range(repeats))
    for name, stage in zip(STAGE_NAMES, stages, strict=True):
        costs[name] = min(_loop_us(stage, _messages(count), settle) for _ in range(repeats)) - baseline
    for name, stage in (extra or {}).items():
        costs[name] = min(_loop_us(stage, _messages(count), settle) for _ in range(repeats)) - baseline
    costs["passthrough"] = baseline
    return costs
