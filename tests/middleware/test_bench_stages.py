"""The five-stage set-up of ``orkeon bench hub`` counts everything it claims to: after
``settle`` every span of the run is exported and the metrics hold every message."""

from __future__ import annotations

from typing import Any

from orkeon_actors.bench.hub import post_receive_per_second
from orkeon_actors.bench.middleware import STAGE_NAMES, FiveStages, stage_costs_us


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
