"""Opening a bad store raises a typed StoreError subclass that says what to do, and
leaves nothing running."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import StoreCorruptError, StoreDirectoryMissingError, StoreError, StoreNotWritableError


def _a_store_with_data(path: Path) -> bytes:
    with ok.Runtime.start(store=path) as rt:
        rt.hub.register_mailbox("agent://c/a")
        for i in range(50):
            rt.hub.bind("c", "a").post("agent://c/a", {"n": i, "pad": "x" * 500})
    return path.read_bytes()


def _no_thread_left(before: set[threading.Thread]) -> bool:
    return all(not t.is_alive() for t in set(threading.enumerate()) - before)


@pytest.mark.parametrize("damage", ["truncated", "garbled"])
def test_a_damaged_file_is_a_store_corrupt_error(tmp_path: Path, damage: str) -> None:
    good = _a_store_with_data(tmp_path / "good.db")
    bad = tmp_path / "bad.db"
    if damage == "truncated":
        bad.write_bytes(good[: len(good) // 2 + 100])
    else:
        garbled = bytearray(good)
        garbled[100:4000] = bytes((i * 37 + 11) % 256 for i in range(3900))
        bad.write_bytes(bytes(garbled))
    before = set(threading.enumerate())
    with pytest.raises(StoreCorruptError) as caught:
        ok.Runtime.start(store=bad)
    message = str(caught.value)
    assert str(bad) in message and "backup" in message and ".recover" in message
    assert caught.value.path == str(bad)
    ok.testing.wait_until(lambda: _no_thread_left(before), what="nothing left running")
    with pytest.raises(StoreCorruptError):  # the lock was released: the same error again, not StoreLockedError
        ok.Runtime.start(store=bad)


def test_a_missing_directory_is_a_store_directory_missing_error(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "state.db"
    with pytest.raises(StoreDirectoryMissingError) as caught:
        ok.Runtime.start(store=path)
    assert str(path.parent) in str(caught.value) and "Create it" in str(caught.value)
    assert isinstance(caught.value, StoreError)


def test_an_unwritable_location_is_a_store_not_writable_error() -> None:
    # /sys refuses to create files even for root (CI runs as root, so chmod proves nothing)
    with pytest.raises(StoreNotWritableError) as caught:
        ok.Runtime.start(store="/sys/orkeon-state.db")
    assert "writable path" in str(caught.value)
