"""The `orkeon` command a new user meets first."""

from __future__ import annotations

from pathlib import Path

import pytest

from orkeon_actors.cli.main import main


def test_demo_runs_the_hub_on_the_durable_store_then_a_simulation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "demo.db"
    assert main(["demo", "--no-color", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert store.exists()
    assert "saw orders.created from orders/planner" in out
    assert "reply: {'order': 42, 'score': 0.12, 'verdict': 'ok'}" in out
    assert "_system.wait_timed_out" in out
    assert "SendTimeoutError" in out
    assert "after the restart, took" in out and "order 42 approved" in out
    for crew in ("newsroom-1", "research-2", "scoring-3"):
        assert f"{crew}" in out
    assert out.count("completed:") == 3


def test_bench_rejects_an_unknown_suite() -> None:
    with pytest.raises(SystemExit, match="unknown bench suite"):
        main(["bench", "nonsense"])
