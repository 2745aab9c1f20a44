"""``orkeon crew validate`` and ``orkeon crew run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orkeon_actors.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples/crews").glob("*.yaml"))


def test_validate_accepts_every_example_crew(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(EXAMPLES) == 7  # one per orchestration mode, and the OpenAI-compatible crew
    assert main(["crew", "validate", *map(str, EXAMPLES)]) == 0
    out = capsys.readouterr().out
    assert out.count(": ok (crew") == 7


def test_validate_exits_1_and_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nagents:\n  - id: a\n    model: {provider: scripted, script: [hi]}\n    budget: {max_tokens: -5}\n"
        "orchestration: {mode: sequential, tasks: []}\n",
        encoding="utf-8",
    )
    assert main(["crew", "validate", str(EXAMPLES[0]), str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}: 2 problems" in out
    assert f"agents[0].budget.max_tokens: expected a positive integer, got -5 ({bad}:5:26)" in out
    assert "orchestration.tasks: expected at least 1 entry" in out


def test_validate_json_gives_pointer_file_line_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nagents: []\norchestration: {mode: nope}\n", encoding="utf-8")
    assert main(["crew", "validate", "--json", str(bad)]) == 1
    [result] = json.loads(capsys.readouterr().out)
    assert result["valid"] is False
    by_pointer = {i["pointer"]: i for i in result["issues"]}
    assert by_pointer["/orchestration/mode"]["line"] == 3 and by_pointer["/orchestration/mode"]["file"] == str(bad)
    assert "/agents" in by_pointer


def test_run_runs_a_crew_on_the_embedded_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "crew.db"
    assert main(["crew", "run", str(ROOT / "examples/crews/hierarchical.yaml"), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"on store {store}" in out
    assert "-> completed: report: r1 found prices; r2 found reviews" in out
    assert "r1 found prices" in out and store.exists()


def test_run_simulate_runs_on_a_virtual_clock(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crew", "run", "--simulate", str(ROOT / "examples/crews/sequential.yaml")]) == 0
    out = capsys.readouterr().out
    assert "-> completed: edited(draft: actors are data)" in out
    assert "simulated 60s" in out


def test_run_an_invalid_crew_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n", encoding="utf-8")
    assert main(["crew", "run", str(bad)]) == 2
    assert "agents: missing" in capsys.readouterr().out
