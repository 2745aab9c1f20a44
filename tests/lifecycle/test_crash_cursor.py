"""Events kept for a sleeping crew's cursor survive a crash (real processes,
``cursor_child.py``, SIGKILLed): kept while it sleeps, handed over at its wake, and
deleted only with its next snapshot, so a crash after the wake hands them over again
to the crew restored from its last snapshot: each read once in its final result."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("cursor_child.py")


def _run(db: Path, phase: str, *, killed: bool) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(CHILD), str(db), phase], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == (-signal.SIGKILL if killed else 0), done.stderr[-3000:]
    return done.stdout.splitlines()


def test_kept_events_are_read_once_across_a_crash_after_the_wake(tmp_path: Path) -> None:
    db = tmp_path / "cursor.db"
    assert "KEPT 3" in _run(db, "sleep", killed=True)
    assert "READ 3" in _run(db, "woken", killed=True)  # read, not yet reflected by a snapshot: still kept
    [line] = [line for line in _run(db, "finish", killed=False) if line.startswith("RESULT ")]
    assert json.loads(line.split(" ", 1)[1]) == {"read": [0, 1, 2], "kept": 0}
