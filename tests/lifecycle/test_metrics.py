"""Spec §14.2 and issue #8: the lifecycle's OpenTelemetry instruments (asleep gauge,
sleep and wake counters, wake latency histogram) and its structured transition logs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from loguru import logger
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from orkeon_actors.crew import CrewStatus, call, respond
from orkeon_actors.lifecycle import LifecycleState
from orkeon_actors.lifecycle.metrics import LOG_COMPONENT
from orkeon_actors.store import faults
from orkeon_actors.testing import wait_until

from .conftest import Env
from .test_sleep_wake import _crew


class Metrics:
    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def values(self, name: str) -> dict[frozenset[tuple[str, Any]], Any]:
        """``{frozenset(attributes): value}`` (sum/gauge value, histogram count)."""
        out: dict[frozenset[tuple[str, Any]], Any] = {}
        data = self.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data is not None else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            key = frozenset(dict(point.attributes or {}).items())
                            out[key] = point.count if hasattr(point, "bucket_counts") else point.value
        return out


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    m = Metrics()
    yield m
    m.provider.shutdown()


@pytest.fixture
def transitions() -> Iterator[list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    handler = logger.add(
        lambda m: records.append(m.record),
        level="DEBUG",
        format="{message}",
        filter=lambda r: r["extra"].get("component") == LOG_COMPONENT,
    )
    yield records
    logger.remove(handler)


def _of(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def _forever(_: object) -> Any:
    return _crew(call("receive_message", {"wait_forever": True}), respond("done"))


def test_sleeps_wakes_the_asleep_gauge_and_the_wake_latency_are_recorded(env: Env, metrics: Metrics) -> None:
    env.factories["c"] = _forever
    sup = env.boot(meter_provider=metrics.provider)
    for crew in ("c1", "c2"):
        sup.spawn("c", crew)
        env.settle(crew)
        assert sup.sleep(crew)
    assert metrics.values("orkeon_crew_sleeps_total") == {_of(reason="explicit"): 2}
    assert metrics.values("orkeon_crew_asleep_total") == {frozenset(): 2}
    assert metrics.values("orkeon_crew_wakes_total") == {}

    env.hub.bind("o").post("agent://c1/a", "wake")
    env.settle("c1", CrewStatus.COMPLETED)
    assert metrics.values("orkeon_crew_wakes_total") == {_of(trigger="post"): 1}
    assert metrics.values("orkeon_crew_wake_latency_seconds") == {_of(trigger="post"): 1}
    assert metrics.values("orkeon_crew_asleep_total") == {frozenset(): 1}
    assert sup.stats.wakes == 1 and sup.stats.asleep == 1  # the plain counters agree


def test_idle_sleeps_and_expiry_wakes_carry_their_reason_and_trigger(env: Env, metrics: Metrics) -> None:
    env.factories["f"] = lambda _: _crew(call("wait_for_event", {"topic": "x", "timeout_ms": 60_000}), respond("t"))
    sup = env.boot(idle_timeout=10, meter_provider=metrics.provider)
    sup.spawn("f", "f1")
    env.settle("f1")
    env.clock.advance(11)
    env.asleep("f1")
    assert metrics.values("orkeon_crew_sleeps_total") == {_of(reason="idle"): 1}
    env.clock.advance(60)
    assert env.settle("f1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    assert metrics.values("orkeon_crew_wakes_total") == {_of(trigger="expiry"): 1}


def test_the_asleep_gauge_starts_from_the_store_at_boot(env: Env, metrics: Metrics) -> None:
    env.factories["c"] = _forever
    sup = env.boot()
    for crew in ("c1", "c2", "c3"):
        sup.spawn("c", crew)
        env.settle(crew)
        assert sup.sleep(crew)
    env.restart(meter_provider=metrics.provider)
    assert metrics.values("orkeon_crew_asleep_total") == {frozenset(): 3}
    assert metrics.values("orkeon_crew_sleeps_total") == {}  # sleeps of the previous run are not recounted


def test_a_failed_sleep_is_counted_and_logged_as_a_warning(
    env: Env, metrics: Metrics, transitions: list[dict[str, Any]]
) -> None:
    env.factories["c"] = _forever
    sup = env.boot(meter_provider=metrics.provider)
    sup.spawn("c", "c1")
    env.settle("c1")

    def boom(point: str) -> None:
        if point == "lifecycle.save":
            raise OSError("disk full (injected)")

    faults.install(boom)
    try:
        assert sup.sleep("c1") is False
    finally:
        faults.uninstall()
    assert metrics.values("orkeon_crew_sleep_failures_total") == {_of(reason="write_failed"): 1}
    assert metrics.values("orkeon_crew_sleeps_total") == {}
    [failure] = [r for r in transitions if r["level"].name == "WARNING"]
    assert failure["extra"]["crew_id"] == "c1"
    assert (failure["extra"]["from_state"], failure["extra"]["to_state"]) == ("Snapshotting", "Active")
    assert "disk full (injected)" in failure["extra"]["reason"]


def test_every_transition_of_a_sleep_and_a_wake_is_logged_with_its_states(
    env: Env, transitions: list[dict[str, Any]]
) -> None:
    env.factories["c"] = _forever
    sup = env.boot()
    sup.spawn("c", "c1")
    env.settle("c1")
    assert sup.sleep("c1")
    env.hub.bind("o").post("agent://c1/a", "wake")
    env.settle("c1", CrewStatus.COMPLETED)
    wait_until(lambda: sup.state("c1") is LifecycleState.COMPLETED, what="c1 completed")
    steps = [
        (r["extra"]["from_state"], r["extra"]["to_state"], r["extra"].get("reason") or r["extra"].get("trigger"))
        for r in transitions
        if r["extra"]["crew_id"] == "c1"
    ]
    assert steps == [
        ("Active", "Snapshotting", "explicit"),
        ("Snapshotting", "Asleep", "explicit"),
        ("Asleep", "Activating", "post"),
        ("Activating", "Active", "post"),
        ("Active", "Completed", None),
    ]
