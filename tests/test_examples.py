"""Every program in examples/ runs as a user would run it (a fresh interpreter, from
the repository), prints what it teaches, and stays short enough to read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NEEDS_AN_LLM = {"openai_compatible_crew"}  # run against a local server by tests/models/test_example.py
PROGRAMS = sorted(
    p for p in EXAMPLES.rglob("*.py") if "middleware_plugin" not in p.parts and p.stem not in NEEDS_AN_LLM
)

EXPECTED = {
    "hub": [
        "subscriber saw: [{'order': 42}]",
        "reply: {'score': 0.12}",
        "no reply: SendTimeoutError",
        "last value: {'open': 3}",
        "cancelled: the wait ended at once",
    ],
    "tools_loop": [
        'send_request -> {"correlation_id"',
        '"response_payload": {"risk": "low"}',
        'get_last_value -> {"found": true, "value": {"order": 7}',
        '"timed_out": true',
        '{"error": {"type": "MailboxNotFoundError"',
    ],
    "durable_crash": [
        "child exit status: -9",
        "booked before the crash: [0, 1, 2]",
        "still to process, in order: [3, 4, 5, 6, 7, 8, 9]",
    ],
    "acl_crews": ["fraud received: [{'invoice': 7}]", "refused: declared-empty", "refused: topic-not-allowed"],
    "sleep_wake": [
        "day 1: Asleep | pending waits: 1",
        "day 2 boot: 1 crew(s) asleep",
        "day 2: completed -> order booked",
        "day 3: Completed -> order booked",
    ],
    "logging_bridge": ["INFO app: received {'order': 42}"],
}


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=180, env={**os.environ, **env}
    )


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_runs_and_prints_what_it_teaches(path: Path) -> None:
    done = _run(str(path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    if path.parent.name == "modes":
        assert done.stdout.rstrip().splitlines()[-1].startswith("-> completed:")
    else:
        for line in EXPECTED[path.stem]:
            assert line in done.stdout, f"{path.name}: {line!r} not in\n{done.stdout}"


ALL_FILES = sorted(p for p in EXAMPLES.rglob("*.py") if "build" not in p.parts)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_is_short_and_commented(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= 100, f"{path.name} is longer than 100 lines"
    assert text.startswith('"""'), f"{path.name} starts with a docstring saying what it teaches"


def test_every_mode_is_written_out_not_imported() -> None:
    modes = {p.stem for p in (EXAMPLES / "modes").glob("*.py")}
    assert modes == {"sequential", "hierarchical", "parallel", "consensual", "graph", "autonomous"}
    for path in (EXAMPLES / "modes").glob("*.py"):
        assert "orkeon_actors.sim.examples" not in path.read_text()


def test_the_middleware_plugin_installs_and_is_found_by_name(tmp_path: Path) -> None:
    """The packaged stage, installed from its own pyproject.toml, is loaded by name."""
    target = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(EXAMPLES / "middleware_plugin"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    done = _run(str(EXAMPLES / "middleware_plugin" / "run.py"), PYTHONPATH=str(target))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'max_payload'" in done.stdout.splitlines()[0]
    assert "max_payload: refused: payload of 5011 bytes exceeds 1000" in done.stdout
    assert "MaxPayload(limit=1_000): refused" in done.stdout
