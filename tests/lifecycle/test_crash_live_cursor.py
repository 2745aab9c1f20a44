"""Topic events a *live* crew's cursors receive survive a crash (real processes,
``live_cursor_child.py``, SIGKILLed): under the supervisor on a durable store, an event
matching a cursor of the crew's last snapshot is kept in ``cursor_events`` from the
moment ``publish`` returns until a snapshot reflects it, so the crew restored from that
snapshot after a kill at any point reads every published event exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lifecycle.children import run_child, tagged

CHILD = Path(__file__).with_name("live_cursor_child.py")


def _run(db: Path, *args: str, killed: bool = False) -> list[str]:
    return run_child(CHILD, str(db), *args, killed=killed)


def _published(lines: list[str]) -> list[int]:
    return [int(line.split()[1]) for line in lines if line.startswith("PUBLISHED ")]


def _finish(db: Path, topic: str = "orders") -> dict[str, object]:
    result: dict[str, object] = tagged(_run(db, "finish", topic), "RESULT")
    return result


@pytest.mark.parametrize("when", ["returned", "read", "slept"])
def test_events_a_live_crew_received_are_read_once_after_a_kill(tmp_path: Path, when: str) -> None:
    db = tmp_path / "live.db"
    _run(db, "setup")
    published = _published(_run(db, "publish", "0", "4", when, killed=True))
    assert published == list(range(5 if when == "slept" else 4))
    # killed again with more events live in its cursor, read or not
    published += _published(_run(db, "publish", str(len(published)), str(len(published) + 3), "read", killed=True))
    assert _finish(db) == {"read": published, "kept": 0}


def test_random_kills_lose_no_topic_event_and_deliver_none_twice(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    _run(db, "setup")
    returned: list[int] = []
    attempted = 0
    for seed in range(6):
        lines = _run(db, "random", str(seed), str(attempted), killed=True)
        got = _published(lines)
        returned += got
        attempted = (got[-1] + 2) if got else attempted + 1  # the one in flight at the kill may be kept too
    result = _finish(db)
    read = result["read"]
    assert isinstance(read, list)
    assert len(read) == len(set(read)), "an event was delivered twice"
    assert set(returned) <= set(read), f"lost: {sorted(set(returned) - set(read))}"
    assert read == sorted(read)  # one publisher: in publish order
    assert result["kept"] == 0


@pytest.mark.parametrize("when", ["returned", "read"])
def test_a_crew_that_never_slept_loses_no_event_of_its_cursor_to_a_kill(tmp_path: Path, when: str) -> None:
    db = tmp_path / "fresh.db"
    # spawned in this process, never put to sleep: killed once publish returned (or once read)
    published = _published(_run(db, "fresh", "0", "4", when, killed=True))
    assert published == [0, 1, 2, 3]
    published += _published(_run(db, "publish", "4", "7", "read", killed=True))  # restored, then killed again
    assert _finish(db) == {"read": published, "kept": 0}


@pytest.mark.parametrize("when", ["returned", "read"])
def test_a_failed_checkpoint_is_taken_again_and_loses_no_event_to_a_kill(tmp_path: Path, when: str) -> None:
    db = tmp_path / "failed.db"
    # its first checkpoint fails: the publishers wait for the next one (taken once the
    # crew read an event and parked again), so what publish returned survives the kill
    published = _published(_run(db, "fresh", "0", "4", when, "fail-first-checkpoint", killed=True))
    assert published == [0, 1, 2, 3]
    assert _finish(db) == {"read": published, "kept": 0}


@pytest.mark.parametrize("when", ["returned", "read"])
def test_a_cursor_opened_after_the_last_snapshot_loses_no_event_to_a_kill(tmp_path: Path, when: str) -> None:
    db = tmp_path / "switch.db"
    _run(db, "setup")  # asleep, its snapshot holds the orders cursor only
    published = _published(_run(db, "switch", "0", "4", when, killed=True))  # then it reads returns
    assert published == [0, 1, 2, 3]
    assert _finish(db, "returns") == {"read": ["switch", *published], "kept": 0}
