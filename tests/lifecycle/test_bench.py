"""``orkeon bench lifecycle`` runs end to end (its figures, not their values)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orkeon_actors.bench import run_suites
from orkeon_actors.cli.main import main


def test_the_lifecycle_bench_sleeps_boots_and_wakes_every_crew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    [result] = run_suites(["lifecycle"], quick=True)
    assert result.suite == "lifecycle" and result.figures["crews"] == 50
    assert set(result.figures) == set(result.units)
    assert all(value > 0 for value in result.figures.values())
    assert list(tmp_path.iterdir()) == []  # its store removed


def test_orkeon_bench_lifecycle_prints_its_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    main(["bench", "lifecycle", "--quick"])
    out = capsys.readouterr().out
    assert "== lifecycle ==" in out and "wakes_per_s" in out
