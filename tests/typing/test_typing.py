"""``mypy --strict`` accepts the documented crew pattern: a CrewActor subclass's ref goes
to start_crew and query_crew without a cast (the refs are generically typed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orkeon_actors.crew import CrewStatus

from .crew_pattern import run

PATTERN = Path(__file__).with_name("crew_pattern.py")


def test_mypy_strict_accepts_the_crew_pattern() -> None:
    # incremental: the package's modules come from the cache .ci/run's `mypy orkeon_actors`
    # left (same strict options); the pattern itself is checked anew whenever it changed
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(PATTERN)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success" in done.stdout


def test_the_crew_pattern_runs() -> None:
    assert run() is CrewStatus.COMPLETED
