"""Observability of crew sleep and wake (spec §14.2, issue #8): OpenTelemetry
instruments, the plain :class:`LifecycleStats` counters, and structured transition logs.

Metrics, on the meter ``orkeon_actors.lifecycle`` of the ``meter_provider`` given to the
supervisor (``None``: the global provider, a no-op until one is set), named like the
hub's telemetry stage (:mod:`orkeon_actors.middleware.telemetry`):

* ``orkeon_crew_asleep_total``: observable gauge, the crews asleep in the store right
  now (counted at boot from the wait index, then kept by every sleep and wake). One
  series: the spec's ``{crew}`` label is not used, since a label per crew id would make
  one series per sleeping crew (a million of them).
* ``orkeon_crew_sleeps_total{reason}``: counter of committed sleeps; ``reason`` is
  ``explicit``, ``idle``, ``capacity`` or ``shutdown``.
* ``orkeon_crew_sleep_failures_total{reason}``: counter of sleeps that did not happen:
  ``refused`` (the crew was not waiting for a message) or ``write_failed`` (the
  snapshot transaction failed; the crew stays active).
* ``orkeon_crew_wakes_total{trigger}``: counter of activations; ``trigger`` is ``post``
  (a post or a request to a parked mailbox), ``topic``, ``reply``, ``expiry`` (the wait
  scheduler), ``explicit`` (``supervisor.wake``) or ``buffered`` (a trigger that arrived
  while the crew was snapshotting).
* ``orkeon_crew_wake_latency_seconds{trigger}``: histogram of the seconds from the
  trigger reaching the supervisor to the restore told to the new crew actor
  (``time.perf_counter``: real time, even under a virtual clock).

Transitions are logged with loguru at DEBUG (failures at WARNING), with
``extra = {"component": "orkeon_actors.lifecycle", "crew_id", "from_state",
"to_state"}`` plus ``reason`` or ``trigger`` when there is one: filter on
``record["extra"]["component"]``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, Final

from loguru import logger
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from orkeon_actors.lifecycle.ports import LifecycleState, SleepReason
from orkeon_actors.model.ids import CrewId

__all__ = ["LOG_COMPONENT", "METER_NAME", "LifecycleStats", "WakeTrigger", "log_transition"]

METER_NAME: Final = "orkeon_actors.lifecycle"
LOG_COMPONENT: Final = "orkeon_actors.lifecycle"


class WakeTrigger:
    """The ``trigger`` label values of the wake instruments."""

    POST: Final = "post"
    TOPIC: Final = "topic"
    REPLY: Final = "reply"
    EXPIRY: Final = "expiry"
    EXPLICIT: Final = "explicit"
    BUFFERED: Final = "buffered"


_log = logger.bind(component=LOG_COMPONENT)


def log_transition(
    crew_id: CrewId,
    before: LifecycleState | None,
    after: LifecycleState,
    *,
    warning: bool = False,
    **extra: str,
) -> None:
    """Log one lifecycle transition (structured, see the module docstring)."""
    # No bind and no formatting here: loguru returns at once when no sink takes DEBUG
    # (keyword arguments are both the message's fields and the record's extra).
    source = "-" if before is None else before.value
    template = _TEMPLATES.get(tuple(extra))
    if template is None:
        template = _TEMPLATES[tuple(extra)] = "crew {crew_id}: {from_state} -> {to_state}" + "".join(
            f" ({{{key}}})" for key in extra
        )
    emit = _log.warning if warning else _log.debug
    emit(template, crew_id=str(crew_id), from_state=source, to_state=after.value, **extra)


_TEMPLATES: dict[tuple[str, ...], str] = {}
"""The message template per set of extra keys (a handful)."""


class LifecycleStats:
    """The supervisor's counters (``sup.stats``) and their OpenTelemetry instruments.

    Plain attributes for in-process reads (``asleep``, ``sleeps``, ``wakes``,
    ``expiries``, ``sleep_failures``, ``sleep_refusals``, ``wake_latencies``: the last
    100,000 latencies in seconds); every update also records the OTel instrument of
    the module docstring. Updated on the supervisor's thread only; the gauge callback
    reads ``asleep`` from the SDK's collection thread (an int read, atomic)."""

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        self.asleep = 0
        self.sleeps = 0
        self.wakes = 0
        self.sleep_failures = 0
        self.sleep_refusals = 0
        self.expiries = 0
        self.wake_latencies: deque[float] = deque(maxlen=100_000)
        """Seconds from the trigger reaching the supervisor to the restore told to the crew."""
        meter = metrics.get_meter(METER_NAME, meter_provider=meter_provider)
        meter.create_observable_gauge(
            "orkeon_crew_asleep_total",
            callbacks=[self._observe_asleep],
            unit="{crew}",
            description="Crews asleep in the store (a snapshot and pending waits, no actor)",
        )
        self._sleeps = meter.create_counter(
            "orkeon_crew_sleeps_total", unit="{crew}", description="Committed sleeps, per reason"
        )
        self._sleep_failures = meter.create_counter(
            "orkeon_crew_sleep_failures_total",
            unit="{crew}",
            description="Sleeps that did not happen: refused (not waiting) or write_failed (stays active)",
        )
        self._wakes = meter.create_counter(
            "orkeon_crew_wakes_total", unit="{crew}", description="Activations of sleeping crews, per trigger"
        )
        self._wake_latency = meter.create_histogram(
            "orkeon_crew_wake_latency_seconds",
            unit="s",
            description="Trigger reaching the supervisor to the restore told to the crew actor",
        )

    # -- updates (supervisor thread) ----------------------------------------------------

    def booted(self, asleep: int) -> None:
        self.asleep = asleep

    def slept(self, reason: SleepReason) -> None:
        self.sleeps += 1
        self.asleep += 1
        self._sleeps.add(1, {"reason": reason.value})

    def sleep_refused(self) -> None:
        self.sleep_refusals += 1
        self._sleep_failures.add(1, {"reason": "refused"})

    def sleep_failed(self) -> None:
        self.sleep_failures += 1
        self._sleep_failures.add(1, {"reason": "write_failed"})

    def expired(self) -> None:
        self.expiries += 1

    def woke(self, trigger: str, latency: float) -> None:
        self.wakes += 1
        self.asleep = max(0, self.asleep - 1)
        self.wake_latencies.append(latency)
        attributes = {"trigger": trigger}
        self._wakes.add(1, attributes)
        self._wake_latency.record(latency, attributes)

    # -- reads ------------------------------------------------------------------------

    def _observe_asleep(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self.asleep)]

    def as_dict(self) -> dict[str, Any]:
        lat = sorted(self.wake_latencies)

        def pct(p: float) -> float | None:
            return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else None

        return {
            "asleep": self.asleep,
            "sleeps": self.sleeps,
            "wakes": self.wakes,
            "sleep_failures": self.sleep_failures,
            "sleep_refusals": self.sleep_refusals,
            "expiries": self.expiries,
            "wake_latency_p50": pct(0.5),
            "wake_latency_p99": pct(0.99),
        }
