"""Events kept for a sleeping crew's cursor survive a crash (real processes,
``cursor_child.py``, SIGKILLed): kept while it sleeps, handed over at its wake, and
deleted only with its next snapshot, so a crash after the wake hands them over again
to the crew restored from its last snapshot: each read once in its final result."""

from __future__ import annotations

from pathlib import Path

from tests.lifecycle.children import run_child, tagged

CHILD = Path(__file__).with_name("cursor_child.py")


def _run(db: Path, phase: str, *, killed: bool) -> list[str]:
    return run_child(CHILD, str(db), phase, killed=killed)


def test_kept_events_are_read_once_across_a_crash_after_the_wake(tmp_path: Path) -> None:
    db = tmp_path / "cursor.db"
    assert "KEPT 3" in _run(db, "sleep", killed=True)
    # the three orders and the "go" that woke it: read, not yet reflected by a snapshot, still kept
    assert "READ 4" in _run(db, "woken", killed=True)
    assert tagged(_run(db, "finish", killed=False), "RESULT") == {"read": [0, 1, 2], "kept": 0}
