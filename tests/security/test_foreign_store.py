"""Files that are not ours: verified before anything is changed (issue 15).

Before: a foreign SQLite file was switched to WAL and left with a ``.lock`` beside it,
and only then refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

import orkeon_actors as ok
from orkeon_actors.errors import StoreVersionError
from orkeon_actors.store.schema import APPLICATION_ID, SCHEMA_VERSION


def _sqlite(statements: list[str]) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        conn = apsw.Connection(str(path))
        for statement in statements:
            conn.execute(statement)
        conn.close()

    return make


FOREIGN: dict[str, tuple[Callable[[Path], None], str]] = {
    "not-sqlite": (lambda p: p.write_bytes(b"PK\x03\x04 a zip, not a database" * 50), "not a SQLite database"),
    "truncated-header": (lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20), "not a SQLite database"),
    "other-application": (_sqlite(["PRAGMA application_id = 1234", "CREATE TABLE t(x)"]), "another application"),
    "foreign-tables": (_sqlite(["CREATE TABLE customers(id INTEGER PRIMARY KEY)"]), "not an orkeon store"),
    "foreign-user-version": (_sqlite(["CREATE TABLE t(x)", "PRAGMA user_version = 2"]), "not an orkeon store"),
    "newer-orkeon": (
        _sqlite([f"PRAGMA application_id = {APPLICATION_ID}", f"PRAGMA user_version = {SCHEMA_VERSION + 1}"]),
        "newer release",
    ),
    "foreign-wal-mode": (
        _sqlite(["PRAGMA journal_mode = WAL", "CREATE TABLE customers(id)", "INSERT INTO customers VALUES (1)"]),
        "not an orkeon store",
    ),
}


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_foreign_file_is_refused_and_left_exactly_as_it_was(tmp_path: Path, kind: str) -> None:
    make, reason = FOREIGN[kind]
    path = tmp_path / "state.db"
    make(path)
    before = _snapshot(tmp_path)
    with pytest.raises(StoreVersionError, match=reason):
        ok.Runtime.start(store=str(path))
    assert _snapshot(tmp_path) == before  # byte for byte, and no .lock, -wal or -shm beside it


def test_a_crashed_stores_wal_is_read_before_judging_it(tmp_path: Path) -> None:
    """A store killed before its first checkpoint has an empty-looking main file: its
    identity is in the WAL, which the check reads through the owner's -shm."""
    import subprocess
    import sys

    path = tmp_path / "state.db"
    child = (
        "import os, orkeon_actors as ok\n"
        f"rt = ok.Runtime.start(store={str(path)!r})\n"
        "rt.hub.register_mailbox('agent://c/a')\n"
        "rt.hub.bind('c', 'b').post('agent://c/a', 'kept')\n"
        "os.kill(os.getpid(), 9)\n"
    )
    subprocess.run([sys.executable, "-c", child], check=False)
    assert (tmp_path / "state.db-wal").stat().st_size > 0
    with ok.Runtime.start(store=str(path)) as rt:
        reg = rt.hub.register_mailbox("agent://c/a")
        assert reg.reader().receive().json() == "kept"


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    with ok.Runtime.start(store=str(path)) as rt:
        assert rt.hub.schema_version == SCHEMA_VERSION  # type: ignore[attr-defined]
