"""Every script in examples/ runs and exits 0."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
NEEDS_AN_LLM = {"openai_compatible_crew"}  # run against a local server by tests/models/test_example.py
SIMULATED = [p for p in sorted(EXAMPLES_DIR.glob("*.py")) if p.stem not in NEEDS_AN_LLM]


@pytest.mark.parametrize("path", SIMULATED, ids=lambda p: p.stem)
def test_example_script_runs(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    namespace = runpy.run_path(str(path))
    assert namespace["main"]() == 0
    out = capsys.readouterr().out
    assert "-> completed" in out


def test_orkeon_simulate_prints_a_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    from orkeon_actors.cli.main import main

    assert main(["simulate", "graph"]) == 0
    out = capsys.readouterr().out
    assert "== graph" in out and "transition" in out and "-> completed" in out
    assert main(["simulate", "nope"]) == 2
