"""``orkeon bench a2a`` on a tiny run: registered, both servers really answered, every
figure under its documented key with its target. No timing is asserted (figures go in
the bench)."""

from __future__ import annotations

import json

from orkeon_actors.bench.a2a import run_a2a
from orkeon_actors.bench.registry import SUITE_NAMES, load_suite, to_json


def test_a_tiny_run_reports_both_servers_and_the_ratio() -> None:
    assert "a2a" in SUITE_NAMES and load_suite("a2a") is not None
    data = json.loads(to_json([run_a2a(rounds=1, per_round=2)]))
    figures = data["a2a"]
    assert set(figures) == {
        "crew_round_trips_per_s",
        "bare_sdk_round_trips_per_s",
        "crew_round_trip_ms",
        "bare_sdk_round_trip_ms",
        "round_trip_vs_bare_sdk",
    }
    assert all(value > 0 for value in figures.values())
    assert set(data["targets"]["a2a"]) == {"round_trip_vs_bare_sdk"}
