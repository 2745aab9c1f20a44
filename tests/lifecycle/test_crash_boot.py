"""Spec §7.3, §16.2 with real processes (``life_child.py``), SIGKILLed: lazy boot wakes
nothing spontaneously; an ``expires_at`` already past wakes the crew at once with its
timeout; a trigger is processed once even if the process dies during activation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.lifecycle.children import run_child, tagged

CHILD = Path(__file__).with_name("life_child.py")


def _run(db: Path, phase: str, at: float, *options: str, killed: bool = False) -> list[str]:
    return run_child(CHILD, str(db), phase, "--at", str(at), *options, killed=killed)


def _tool_results(crew: dict[str, Any]) -> list[dict[str, Any]]:
    assert crew["status"] == "completed" and crew["failure"] is None
    return [json.loads(r) for r in json.loads(crew["result"])]


@pytest.fixture
def asleep(tmp_path: Path) -> Path:
    """Three crews put to sleep, then the process killed."""
    db = tmp_path / "life.db"
    assert "ASLEEP" in _run(db, "sleep", 0, killed=True)
    return db


def test_a_killed_process_reboots_lazily_and_a_past_expiry_wakes_at_once(asleep: Path) -> None:
    lines = _run(asleep, "boot", 10, killed=True)
    assert tagged(lines, "BOOTED") == 3
    assert tagged(lines, "STATE") == {"states": dict.fromkeys(("finite", "forever", "mail"), "Asleep"), "wakes": 0}
    result = tagged(_run(asleep, "run", 3600, "--expect", "finite"), "RESULT")
    [timeout] = _tool_results(result["results"]["finite"])
    assert timeout["timed_out"] is True and timeout["metadata"]["original_topic"] == "x"
    assert result["states"] == {"forever": "Asleep", "mail": "Asleep"} and result["expiries"] == 1


@pytest.mark.parametrize("kill", ["factory", "model"])
@pytest.mark.parametrize(("phase", "crew"), [("post", "mail"), ("publish", "forever")])
def test_a_post_or_a_topic_trigger_is_processed_once_when_the_process_dies_during_activation(
    asleep: Path, phase: str, crew: str, kill: str
) -> None:
    """A post is durable once ``post`` returns; a published event that wakes a sleeping
    crew is kept for it before ``publish`` returns. A crash during the activation loses
    neither: the next boot wakes the crew with it, and it is not delivered again."""
    lines = _run(asleep, phase, 10, "--kill", kill, "--expect", crew, killed=True)
    assert (f"ACTIVATING {crew}" if kill == "factory" else f"DELIVERED {crew}") in lines
    result = tagged(_run(asleep, "run", 20, "--expect", crew), "RESULT")
    [received] = _tool_results(result["results"][crew])
    assert received["timed_out"] is False and received["message"]["payload"] == {"n": 1}
    others = {c: "Asleep" for c in ("finite", "forever", "mail") if c != crew}
    assert result["states"] == others
    after = _run(asleep, "boot", 30, killed=True)  # not delivered again
    assert tagged(after, "STATE") == {"states": {**others, crew: "Completed"}, "wakes": 0}


@pytest.mark.parametrize("kill", ["factory", "model"])
def test_an_expiry_is_processed_once_when_the_process_dies_during_activation(asleep: Path, kill: str) -> None:
    lines = _run(asleep, "run", 3600, "--kill", kill, "--expect", "finite", killed=True)
    assert ("ACTIVATING finite" if kill == "factory" else "DELIVERED finite") in lines
    result = tagged(_run(asleep, "run", 3700, "--expect", "finite"), "RESULT")
    [timeout] = _tool_results(result["results"]["finite"])
    assert timeout["timed_out"] is True
    assert result["states"] == {"forever": "Asleep", "mail": "Asleep"}
