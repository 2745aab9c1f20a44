"""Crash tests: a real child process runs a crew on a durable hub and is SIGKILLed at a
chosen point; a second process recovers from the same file. Invariants (§16.2 "crash
mid-handle", §11.2, §11.3):

* every message whose ``post`` returned (accepted) is processed;
* no message is processed twice by the crew;
* the crew processes the mailbox in FIFO order;
* the outbox delivers each processed message's outgoing post exactly once, in order,
  and its retained publish ends on the last processed message (redelivered at reboot);
* nothing is left in the worker's mailbox.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CHILD = Path(__file__).with_name("crash_child.py")
MESSAGES = 12

STORE_POINTS = (
    "writer.before_commit",
    "writer.after_commit",
    "outbox.before_dispatch",
    "outbox.mid_dispatch",
    "outbox.after_route",
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=60, check=False)


def _lines(output: str, tag: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in output.splitlines() if line.startswith(tag + " ")]


def crash_and_recover(db: Path, kill: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    first = _run(str(db), "--produce", str(MESSAGES), "--kill", kill)
    assert first.returncode in (0, -signal.SIGKILL), first.stderr
    if first.returncode == 0:
        assert "DONE" in first.stdout.splitlines()
    second = _run(str(db), "--recover")
    assert second.returncode == 0, second.stderr
    [result] = _lines(second.stdout, "RESULT")
    return first, json.loads(result)


def check_invariants(first: subprocess.CompletedProcess[str], result: dict[str, Any]) -> None:
    accepted = _lines(first.stdout, "ACCEPTED")
    processed: list[str] = result["processed"]
    assert set(accepted) <= set(processed), "an accepted message was lost"
    assert len(processed) == len(set(processed)), "a message was processed twice"
    assert processed == sorted(processed), "the mailbox was not processed in FIFO order"
    assert result["sink"] == processed, "the outbox lost, duplicated or reordered an outgoing post"
    assert result["last_value"] == (processed[-1] if processed else None)
    assert result["worker_left"] == []
    if first.returncode == 0:
        assert len(processed) == MESSAGES


@pytest.mark.parametrize(
    "kill",
    [
        "accept:4",  # after accept: a post was acknowledged, then the process died
        "handle:3",  # mid-handle: effects recorded, unit of work not committed
        "writer.before_commit:14",  # inside a transaction, statements run, no COMMIT
        "writer.after_commit:14",  # committed, nobody acknowledged yet
        "outbox.before_dispatch:2",  # unit of work committed, outbox not dispatched
        "outbox.mid_dispatch:3",  # inside the dispatch transaction
        "outbox.after_route:2",  # a publish routed, not yet marked dispatched
    ],
)
def test_crash_at_a_chosen_point_loses_and_duplicates_nothing(tmp_path: Path, kill: str) -> None:
    first, result = crash_and_recover(tmp_path / "state.db", kill)
    assert first.returncode == -signal.SIGKILL, "the kill point was never reached"
    check_invariants(first, result)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    where=st.sampled_from(("accept", "handle", *STORE_POINTS)),
    nth=st.integers(min_value=1, max_value=30),
)
def test_crash_anywhere_chosen_by_hypothesis(tmp_path_factory: pytest.TempPathFactory, where: str, nth: int) -> None:
    db = tmp_path_factory.mktemp("crash") / "state.db"
    first, result = crash_and_recover(db, f"{where}:{nth}")
    check_invariants(first, result)
