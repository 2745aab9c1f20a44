"""Crash tests of the sent history: a real child process is SIGKILLed at each named
point of a send (armed by ``ORKEON_TEST_SEND_FAIL_AFTER``), the file is read as it was
left (read-only, as ``orkeon message sent`` does), then a second process boots it.

After the restart: no completed row without its recipient copy, no duplicate row or
copy, every send whose call returned is a row, resumption completed (coverage
``complete``), and the ledger verifies. While an intent was pending before the boot,
the coverage read ``partial``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

import orkeon_actors as ok
from orkeon_actors.errors import IdempotencyKeyConflictError
from orkeon_actors.history.endpoint import parse_sender
from orkeon_actors.store.faults import SEND_POINTS
from orkeon_actors.store.sent_reads import read_history

CHILD = Path(__file__).with_name("send_child.py")
SENDS = 5


def _child(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(db), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _accepted(output: str) -> list[str]:
    return [line.split()[1] for line in output.splitlines() if line.startswith("ACCEPTED ")]


def _as_left(db: Path, sender: str) -> tuple[str, int, list[str]]:
    """The coverage and rows of ``sender`` in the file as the crash left it."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        history = read_history(conn, parse_sender(f"agent://{sender}"))
    finally:
        conn.close()
    return history.coverage.state.value, history.coverage.pending, [r.message_id for r in history.rows]


def crash(db: Path, mode: str, point: str, nth: int) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {"ORKEON_TEST_HOOKS": "1", "ORKEON_TEST_SEND_FAIL_AFTER": point, "ORKEON_TEST_SEND_FAIL_NTH": str(nth)}
    first = _child(db, mode, str(SENDS), env=env)
    assert first.returncode in (0, -signal.SIGKILL), first.stderr
    sender = "b/bob" if mode == "reply" else "a/alice"
    state, pending, rows = _as_left(db, sender)
    second = _child(db, "--recover")
    assert second.returncode == 0, second.stderr
    [line] = [line for line in second.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.split(" ", 1)[1])
    result["left"] = {"state": state, "pending": pending, "rows": rows}
    result["sender"] = sender
    return first, result


def check(first: subprocess.CompletedProcess[str], result: dict[str, Any], mode: str) -> None:
    sender = result["sender"]
    rows: list[str] = result["sent"][sender]
    assert len(rows) == len(set(rows)), "a send has two rows"
    assert set(_accepted(first.stdout)) <= set(rows), "a send whose call returned has no row"
    assert result["left"]["rows"] == rows[: len(result["left"]["rows"])], "a row changed across the restart"
    if mode not in ("reply", "topic"):
        mailbox: list[str] = result["bob_mailbox"]
        assert len(mailbox) == len(set(mailbox)), "a second recipient copy"
        assert set(rows) <= set(mailbox), "a completed row without its recipient copy"
        assert set(result["left"]["rows"]) <= set(mailbox)
    if result["left"]["pending"]:
        assert result["left"]["state"] == "partial"
    assert result["coverage"] == {"a/alice": "complete", "b/bob": "complete"}
    assert result["after_boot"][sender] == "complete", "the boot did not resume the pending intents"
    assert all(result["verify"].values()), result["verify"]
    if first.returncode == 0:
        assert len(rows) == SENDS


@pytest.mark.parametrize("point", SEND_POINTS)
def test_a_post_killed_at_any_point_is_all_or_nothing(tmp_path: Path, point: str) -> None:
    first, result = crash(tmp_path / "s.db", "post", point, 3)
    assert first.returncode == -signal.SIGKILL, f"{point} was never reached"
    check(first, result, "post")
    assert result["left"]["pending"] == 0  # one transaction: never a half-done post
    assert len(result["sent"]["a/alice"]) == 2


@pytest.mark.parametrize("point", SEND_POINTS)
def test_a_reply_killed_at_any_point_is_pending_then_resolved_at_boot(tmp_path: Path, point: str) -> None:
    # Each point is reached by alice's request, then by bob's reply: the 4th hit is the 2nd reply.
    first, result = crash(tmp_path / "s.db", "reply", point, 4)
    assert first.returncode == -signal.SIGKILL, f"{point} was never reached"
    check(first, result, "reply")
    # The second reply's intent committed before the crash: partial until the boot.
    assert (result["left"]["state"], result["left"]["pending"]) == ("partial", 1)
    assert len(result["sent"]["b/bob"]) == 1


@pytest.mark.parametrize("point", ["outbox.before_dispatch", *SEND_POINTS[2:]])
def test_a_unit_of_works_post_killed_before_its_dispatch_is_resumed_at_boot(tmp_path: Path, point: str) -> None:
    first, result = crash(tmp_path / "s.db", "uow", point, 2)
    assert first.returncode == -signal.SIGKILL, f"{point} was never reached"
    check(first, result, "uow")
    assert result["left"]["state"] == "partial" and result["left"]["pending"] >= 1
    assert len(result["sent"]["a/alice"]) >= 2  # the resumed post with its original bytes


@pytest.mark.parametrize("point", ["send.intent_reserved", "send.recipient_materialised", *SEND_POINTS[2:]])
def test_the_intent_protocol_resumes_with_the_original_bytes_and_no_second_copy(tmp_path: Path, point: str) -> None:
    first, result = crash(tmp_path / "s.db", "staged", point, 3)
    assert first.returncode == -signal.SIGKILL, f"{point} was never reached"
    check(first, result, "staged")
    # The third send's intent committed before the crash: partial in the file as left,
    # resumed (its copy made at most once, its row once) by the recovering process.
    assert (result["left"]["state"], result["left"]["pending"]) == ("partial", 1)
    assert len(result["sent"]["a/alice"]) == 3


def _abandoned(db: Path) -> list[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [str(row[0]) for row in conn.execute("SELECT message_id FROM sent_abandoned")]
    finally:
        conn.close()


@pytest.mark.parametrize("point", SEND_POINTS)
def test_a_topic_post_killed_at_any_point_is_pending_then_abandoned_at_boot(tmp_path: Path, point: str) -> None:
    first, result = crash(tmp_path / "s.db", "topic", point, 3)
    assert first.returncode == -signal.SIGKILL, f"{point} was never reached"
    check(first, result, "topic")
    # The third post's intent committed before the crash: partial in the file as left;
    # its subscribers died with the process, so the boot keeps it for audit, never a row.
    assert (result["left"]["state"], result["left"]["pending"]) == ("partial", 1)
    assert len(result["sent"]["a/alice"]) == 2
    [abandoned] = _abandoned(tmp_path / "s.db")
    assert abandoned not in result["sent"]["a/alice"]


def test_a_keyed_reply_replayed_after_a_sigkill_and_a_restart_returns_the_original(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    point = "send.intent_reserved"  # the 4th hit: the second reply's intent, after the first reply completed
    env = {"ORKEON_TEST_HOOKS": "1", "ORKEON_TEST_SEND_FAIL_AFTER": point, "ORKEON_TEST_SEND_FAIL_NTH": "4"}
    first = _child(db, "keyed-reply", str(SENDS), env=env)
    assert first.returncode == -signal.SIGKILL, first.stderr
    [(reply_id, correlation)] = [
        tuple(line.split()[1:3]) for line in first.stdout.splitlines() if line.startswith("ACCEPTED ")
    ]
    with ok.Runtime.start(store=str(db)) as rt:
        bob = rt.hub.bind("b", "bob")
        again = bob.reply(ok.CorrelationId(correlation), {"re": {"i": 0}}, idempotency_key="answer-0")
        assert str(again.id) == reply_id  # the original, though its requester died with the process
        with pytest.raises(IdempotencyKeyConflictError):
            bob.reply(ok.CorrelationId(correlation), {"re": {"i": 99}}, idempotency_key="answer-0")
        assert [r.message_id for r in bob.sent().rows] == [reply_id]
