"""Spec §7.2, §7.3, §11, §16.2 with real processes (``ack_child.py``), SIGKILLed while a
crew is active after consuming posts: a consumed post is acknowledged only by the
transaction of the crew's next snapshot (or of its completion), so after the restart
the crew, restored from its last snapshot, gets exactly the posts that snapshot does
not reflect, in order. Every post is processed exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.lifecycle.children import run_child, tagged

CHILD = Path(__file__).with_name("ack_child.py")


def _run(db: Path, *steps: str, killed: bool = False) -> list[str]:
    return run_child(CHILD, str(db), *steps, killed=killed)


def _received(lines: list[str]) -> list[int]:
    result = tagged(lines, "RESULT")
    assert result["status"] == "completed" and result["failure"] == ""
    received: list[int] = json.loads(result["result"])
    return received


@pytest.mark.parametrize(
    ("before", "total", "kept"),
    [
        # woken by post 0 from its first snapshot, consumes 0..2, killed: none acknowledged
        (("spawn", "sleep", "post:0-3", "seen:3"), 3, 3),
        # consumes 0..1, sleeps (acknowledging them); woken by 2, consumes 2..4, killed
        (("spawn", "post:0-2", "seen:2", "sleep", "post:2-5", "seen:5"), 5, 3),
        # two sleeps in between: only the posts consumed since the last one are kept
        (("spawn", "post:0-2", "seen:2", "sleep", "post:2-3", "seen:3", "sleep", "post:3-5", "seen:5"), 5, 2),
    ],
    ids=["woken-from-its-first-snapshot", "slept-once-between", "slept-twice-between"],
)
def test_posts_a_woken_crew_consumed_are_redelivered_after_a_kill_and_processed_once(
    tmp_path: Path, before: tuple[str, ...], total: int, kept: int
) -> None:
    db = tmp_path / "life.db"
    lines = _run(db, *before, "state", "kill", killed=True)
    # consumed and handled while active, not yet in a snapshot: still kept; what its
    # sleeps acknowledged is one mailbox mark, not a row per post
    assert tagged(lines, "STATE") == {"state": "Active", "kept": kept, "bookkeeping": int("sleep" in before[2:])}
    # the restart wakes the crew (kept mail) from its last snapshot; the kept posts
    # reach it again, in order, and the ones its snapshot reflects do not
    assert _received(_run(db, "finish")) == list(range(total))
    after = _run(db, "state")  # nothing left to deliver again
    assert tagged(after, "STATE") == {
        "state": "Completed",
        "kept": 0,
        "bookkeeping": 0,
    }  # its outcome is kept, no message


def test_a_kill_inside_the_snapshot_transaction_keeps_the_consumed_posts(tmp_path: Path) -> None:
    db = tmp_path / "life.db"
    _run(db, "spawn", "post:0-2", "seen:2", "sleep")
    lines = _run(db, "post:2-4", "seen:4", "kill-in-save", "sleep", killed=True)
    assert lines == []  # killed before the sleep committed
    assert _received(_run(db, "finish")) == [0, 1, 2, 3]


def test_a_kill_after_the_restart_redelivered_the_posts_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "life.db"
    _run(db, "spawn", "sleep", "post:0-2", "seen:2", "kill", killed=True)
    _run(db, "post:2-3", "seen:3", "kill", killed=True)  # redelivered 0, 1 then got 2: killed again
    assert _received(_run(db, "post:3-4", "finish")) == [0, 1, 2, 3]


def test_a_graceful_stop_puts_the_woken_crew_to_sleep_and_posts_after_the_restart_wake_it(tmp_path: Path) -> None:
    db = tmp_path / "life.db"
    _run(db, "spawn", "sleep", "post:0-2", "seen:2")  # ends with CrewSupervisor.stop()
    lines = _run(db, "state", "post:2-3", "finish")
    assert tagged(lines, "STATE") == {"state": "Asleep", "kept": 0, "bookkeeping": 1}
    assert _received(lines) == [0, 1, 2]


def test_a_post_only_crew_that_never_slept_is_gone_after_a_kill_its_consumed_posts_kept(tmp_path: Path) -> None:
    """docs/lifecycle.md, "Durability windows left open": what a user sees."""
    db = tmp_path / "life.db"
    _run(db, "spawn", "post:0-3", "seen:3", "kill", killed=True)
    lines = _run(db, "state")
    assert tagged(lines, "STATE") == {"state": "Unknown", "kept": 3, "bookkeeping": 0}


def test_a_crew_spawned_with_a_checkpoint_is_restored_after_a_kill_before_it_ever_slept(tmp_path: Path) -> None:
    db = tmp_path / "life.db"
    lines = _run(db, "spawn:checkpoint", "post:0-3", "seen:3", "state", "kill", killed=True)
    assert tagged(lines, "STATE") == {"state": "Active", "kept": 3, "bookkeeping": 0}
    # restored from its checkpoint (taken at its first wait), given the three posts again
    assert _received(_run(db, "post:3-4", "finish")) == [0, 1, 2, 3]
