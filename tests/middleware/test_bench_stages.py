"""The five-stage set-up of ``orkeon bench hub`` counts everything it claims to: after
``settle`` every span of the run is exported and the metrics hold every message."""

from __future__ import annotations

from typing import Any

import pytest

from orkeon_actors.bench import peer_autogen
from orkeon_actors.bench.hub import post_receive_per_second
from orkeon_actors.bench.middleware import PRODUCTION, PRODUCTION_FULL_SAMPLING, STAGE_NAMES, FiveStages, stage_costs_us


def _points(five: FiveStages, name: str) -> list[Any]:
    data = five.metric_reader.get_metrics_data()
    assert data is not None
    return [
        point
        for resource_metrics in data.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def test_a_settled_staged_run_exported_every_span_and_counted_every_message() -> None:
    with FiveStages() as five:
        assert post_receive_per_second(300, five.stages, settle=five.settle) > 0
        assert five.take_exported_spans() == 600
        assert five.take_exported_spans() == 0  # forgotten once counted
        (published,) = _points(five, "orkeon_event_published_total")
        assert published.value == 300
        latency = {dict(p.attributes)["pattern"]: p.count for p in _points(five, "orkeon_event_latency_seconds")}
        assert latency == {"post": 300, "receive": 300}


def test_stage_costs_name_every_stage_and_the_pipeline() -> None:
    with FiveStages() as five:
        costs = stage_costs_us(five.stages, 50, 1, five.settle)
        assert set(costs) == {*STAGE_NAMES, "passthrough"}
        assert five.take_exported_spans() == 100  # the telemetry loop's spans, all exported


def test_the_production_profile_samples_one_trace_in_a_hundred_and_records_latency_once() -> None:
    with FiveStages(PRODUCTION) as five:
        assert post_receive_per_second(2_000, five.stages, settle=five.settle) > 0
        exported = five.take_exported_spans()
        assert exported % 2 == 0 and exported < 2 * 2_000 * 0.05  # whole traces, about 1%
        latency = {dict(p.attributes)["pattern"]: p.count for p in _points(five, "orkeon_event_latency_seconds")}
        assert latency == {"receive": 2_000}  # once per message, on receive
        (published,) = _points(five, "orkeon_event_published_total")
        assert published.value == 2_000


def test_the_peer_rows_run_autogen_core_on_the_same_tracer_provider() -> None:
    assert peer_autogen.unavailable() is None, "the bench extra (autogen-core 0.7.5) is part of CI"
    with FiveStages(PRODUCTION_FULL_SAMPLING) as five:
        assert peer_autogen.request_reply_per_second(20, five.tracer_provider, settle=five.settle) > 0
        assert peer_autogen.one_way_per_second(20, five.tracer_provider, settle=five.settle) > 0
        assert five.take_exported_spans() > 0  # autogen-core's spans went through the same provider


def test_without_autogen_core_the_peer_rows_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "autogen_core" else real(name))
    reason = peer_autogen.unavailable()
    assert reason is not None and "pip install -e '.[bench]'" in reason
