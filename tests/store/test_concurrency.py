"""One runtime owns a store: a second one (another real process, or this process) gets
a clear ``StoreLockedError`` or waits as configured; never a corrupt file, never
"database is locked" in the middle of an operation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import orkeon_actors as ok
from orkeon_actors.errors import StoreLockedError
from orkeon_actors.store import StoreConfig
from tests.conftest import Background
from tests.store.conftest import Opener

CHILD = Path(__file__).with_name("store_child.py")
BOX = "agent://crew/box"


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_until(proc: subprocess.Popen[str], prefix: str) -> list[str]:
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return lines
    raise AssertionError(f"the child ended before printing {prefix!r}: {proc.stderr and proc.stderr.read()}")


def _integrity(path: Path) -> str:
    conn = apsw.Connection(str(path))
    try:
        row = conn.execute("PRAGMA integrity_check").fetchone()
        assert row is not None
        return str(row[0])
    finally:
        conn.close()


def test_a_second_process_gets_a_clear_error_at_once(open_store: Opener, store_path: Path) -> None:
    open_store()
    result = subprocess.run(
        [sys.executable, str(CHILD), "open", str(store_path), "0"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("LOCKED ")
    assert f"already open by process {os.getpid()}" in result.stdout
    assert "one runtime owns a store at a time" in result.stdout
    assert "database is locked" not in result.stdout + result.stderr


def test_a_second_runtime_of_the_same_process_gets_a_clear_error(open_store: Opener, store_path: Path) -> None:
    open_store()
    with pytest.raises(StoreLockedError, match="another runtime of this process") as caught:
        open_store()
    assert caught.value.holder_pid == os.getpid() and caught.value.path == str(store_path)


def test_a_second_process_can_wait_for_the_owner_to_stop(store_path: Path) -> None:
    owner = _child("hold", str(store_path), "20")
    try:
        _read_until(owner, "HOLDING")
        waiting = Background(lambda: ok.Runtime.start(store=StoreConfig(str(store_path), lock_timeout=60)))
        assert not waiting.done, "the owner still holds the store"
        assert owner.stdin is not None
        owner.stdin.write("stop\n")
        owner.stdin.flush()
        rt = waiting.get(timeout=60)
        assert isinstance(rt, ok.Runtime)
        with rt:
            assert rt.hub.register_mailbox(BOX).depth() == 20
    finally:
        owner.kill()
        owner.wait()


def test_contenders_never_disturb_a_busy_owner(store_path: Path) -> None:
    owner = _child("hold", str(store_path), "300")
    try:
        _read_until(owner, "POSTED 10")
        outsider = apsw.Connection(str(store_path), flags=apsw.SQLITE_OPEN_READONLY)
        outsider.set_busy_timeout(5000)
        try:
            for _ in range(5):
                with pytest.raises(StoreLockedError):
                    ok.Runtime.start(store=str(store_path))
                # a foreign reader reads consistently beside the writer (WAL)
                row = outsider.execute("SELECT count(*) FROM mailboxes").fetchone()
                assert row is not None and row[0] >= 10
        finally:
            outsider.close()
        lines = _read_until(owner, "HOLDING")
        assert owner.stdin is not None
        owner.stdin.write("stop\n")
        owner.stdin.flush()
        out, err = owner.communicate(timeout=60)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
    assert owner.returncode == 0, err
    assert "STOPPED" in out and "locked" not in err.lower()
    assert lines[-2] == "POSTED 299"
    assert _integrity(store_path) == "ok"
    with ok.Runtime.start(store=str(store_path)) as rt:
        assert rt.hub.register_mailbox(BOX).depth() == 300


def test_the_lock_is_released_by_stop(open_store: Opener) -> None:
    open_store().stop()
    open_store().stop()
