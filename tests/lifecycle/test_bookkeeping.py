"""Bounded bookkeeping for crews that never finish (spec §11.2, §11.4): a supervised
crew looping on ``receive_message`` keeps one high-water mark per mailbox instead of a
``processed_messages`` row per post, however many posts it handles across its sleeps;
and a store written before the marks existed (schema version 5, with per-post rows)
opens, migrates and keeps working. Exactly-once under SIGKILL with the marks:
``test_crash_ack.py`` and ``test_bookkeeping_posts.py``; the million-post run:
``orkeon bench lifecycle --posts``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.crew import CrewStatus
from orkeon_actors.lifecycle import LifecycleState
from orkeon_actors.store import SCHEMA_VERSION

from .conftest import Env
from .test_restart import Loop, _finish, _handled, _post


def _bookkeeping_rows(db: Path, crew: str) -> tuple[int, int]:
    """``(processed_messages rows, mailbox marks)`` of ``crew``."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        processed = conn.execute("SELECT count(*) FROM processed_messages WHERE crew_id = ?", (crew,)).fetchone()
        marks = conn.execute("SELECT count(*) FROM mailbox_marks WHERE crew_id = ?", (crew,)).fetchone()
        assert processed is not None and marks is not None
        return int(processed[0]), int(marks[0])
    finally:
        conn.close()


def _run_posts(env: Env, loop: Loop, posts: int, every: int) -> Any:
    """Post ``posts`` messages to crew ``c``, putting it to sleep after every ``every``
    of them (each sleep acknowledges what it consumed); returns the last post."""
    assert env.sup is not None
    last = None
    for n in range(posts):
        last = env.hub.bind("shop", "desk").post("agent://c/a", n)
        _handled(env, loop, "c", n + 1)
        if (n + 1) % every == 0:
            assert env.sup.sleep("c") is True
    assert env.sup.sleep("c") is True
    return last


@settings(max_examples=6, deadline=None)
@given(posts=st.integers(min_value=1, max_value=40), every=st.integers(min_value=1, max_value=12))
def test_a_crew_looping_on_its_mailbox_keeps_one_mark_whatever_the_number_of_posts(
    tmp_path_factory: Any, posts: int, every: int
) -> None:
    env = Env(tmp_path_factory.mktemp("marks") / "life.db")
    try:
        loop = Loop()
        env.factories["loop"] = loop.factory
        sup = env.boot()
        sup.spawn("loop", "c")
        env.settle("c", CrewStatus.WAITING)
        last = _run_posts(env, loop, posts, every)
        # one mailbox, one mark, no per-post row: the same for 1 post or 40
        assert _bookkeeping_rows(env.db, "c") == (0, 1)
        assert env.hub.is_processed(last.id, "c")  # the mark names the last post its snapshot reflects
        assert env.hub.kept_messages("agent://c/a") == []
        assert _finish(env, "c") == list(range(posts))
        assert _bookkeeping_rows(env.db, "c") == (0, 0)  # gone with the finished crew
    finally:
        env.shutdown()


def test_a_version_5_store_with_per_post_rows_opens_and_its_crew_goes_on(env: Env) -> None:
    loop = Loop()
    env.factories["loop"] = loop.factory
    sup = env.boot()
    sup.spawn("loop", "c")
    env.settle("c", CrewStatus.WAITING)
    _run_posts(env, loop, 2, 1)
    env.shutdown()
    # As version 5 left it: no marks table, one processed_messages row per post handled.
    conn = apsw.Connection(str(env.db))
    conn.execute("DROP TABLE mailbox_marks")
    later = [
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sent%'")
    ]
    for table in later:  # version 7's sent history
        conn.execute(f"DROP TABLE {table}")
    for trigger in (
        "first_of_crew",
        "taken_from_crew",
        "last_of_crew",
        "crew_gained",
        "crew_left",
    ):  # version 8's count
        conn.execute(f"DROP TRIGGER pending_waits_{trigger}")
    conn.execute("DROP TABLE store_counts")
    conn.execute("DROP TABLE agent_events")  # version 10's
    conn.execute(
        "INSERT INTO processed_messages VALUES ('01J0000000000000000000000A', 'c', '2026-01-01T00:00:00.000000Z')"
    )
    conn.execute("PRAGMA user_version = 5")
    conn.close()

    sup = env.boot()
    assert (env.hub.schema_migrated_from, env.hub.schema_version) == (5, SCHEMA_VERSION)
    assert sup.state("c") is LifecycleState.ASLEEP
    assert env.hub.is_processed("01J0000000000000000000000A", "c")  # an old row still answers
    _post(env, "c", 2)  # wakes it; its next snapshot writes a mark
    _handled(env, loop, "c", 3)
    assert sup.sleep("c") is True
    assert _bookkeeping_rows(env.db, "c") == (1, 1)
    assert json.loads(json.dumps(_finish(env, "c"))) == [0, 1, 2]
