"""Schema versions and migrations (PRAGMA user_version)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

import orkeon_actors as ok
from orkeon_actors.errors import StoreError, StoreVersionError
from orkeon_actors.store import SCHEMA_VERSION
from orkeon_actors.store.schema import _V1, APPLICATION_ID, CONTRACT_TABLES
from tests.store.conftest import Opener, durable


def _pragma(path: Path, name: str) -> int:
    conn = apsw.Connection(str(path))
    try:
        row = conn.execute(f"PRAGMA {name}").fetchone()
        assert row is not None
        return int(row[0])
    finally:
        conn.close()


def _tables(path: Path) -> set[str]:
    conn = apsw.Connection(str(path))
    try:
        return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def _old_store(path: Path, user_version: int) -> None:
    """A store as an older release wrote it: the §11.1 tables only, one kept post."""
    conn = apsw.Connection(str(path))
    conn.execute(_V1)
    conn.execute(
        "INSERT INTO mailboxes VALUES ('agent://crew/a', '01HZZZZZZZZZZZZZZZZZZZZZZZ', ?, '{\"k\":\"v\"}', "
        "'2025-06-01T00:00:00.000000Z')",
        (b'"from v1"',),
    )
    conn.execute(
        "INSERT INTO crew_snapshots VALUES ('crew', x'7b7d', 'sequential', 1, '2025-06-01T00:00:00.000000Z', 'Asleep')"
    )
    conn.execute(f"PRAGMA user_version = {user_version}")
    conn.close()


def test_a_new_store_gets_the_current_schema(open_store: Opener, store_path: Path) -> None:
    hub = durable(open_store())
    assert (hub.schema_migrated_from, hub.schema_version) == (0, SCHEMA_VERSION)
    hub.stop()
    assert _pragma(store_path, "user_version") == SCHEMA_VERSION
    assert _pragma(store_path, "application_id") == APPLICATION_ID
    assert CONTRACT_TABLES | {"mailbox_registry", "last_values"} <= _tables(store_path)
    conn = apsw.Connection(str(store_path))
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


@pytest.mark.parametrize("user_version", [0, 1])
def test_an_older_store_is_migrated_and_keeps_its_data(open_store: Opener, store_path: Path, user_version: int) -> None:
    _old_store(store_path, user_version)
    rt = open_store()
    hub = durable(rt)
    assert (hub.schema_migrated_from, hub.schema_version) == (1, SCHEMA_VERSION)
    assert ok.MailboxAddress.parse("agent://crew/a") in hub.durable_mailboxes
    reg = hub.register_mailbox("agent://crew/a")
    with reg.reader() as reader:
        kept = reader.receive()
    assert kept.json() == "from v1" and kept.metadata == {"k": "v"}
    hub.register_mailbox("agent://crew/b")
    hub.bind("x", "y").post("agent://crew/b", "new")
    snapshot = hub.load_snapshot("crew")
    assert snapshot is not None and snapshot.snapshot == b"{}"
    rt.stop()
    assert _pragma(store_path, "user_version") == SCHEMA_VERSION


def test_a_store_from_a_newer_release_fails_clearly_and_is_left_untouched(open_store: Opener, store_path: Path) -> None:
    conn = apsw.Connection(str(store_path))
    conn.execute("CREATE TABLE future_table(x)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(StoreVersionError, match=r"newer release\. Upgrade orkeon_actors") as caught:
        open_store()
    assert caught.value.found == SCHEMA_VERSION + 5 and caught.value.known == SCHEMA_VERSION
    assert _pragma(store_path, "user_version") == SCHEMA_VERSION + 5
    assert _tables(store_path) == {"future_table"}
    open_store(store=str(store_path.with_name("other.db"))).stop()  # the lock was released


def test_a_foreign_database_is_refused(open_store: Opener, store_path: Path) -> None:
    conn = apsw.Connection(str(store_path))
    conn.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY)")
    conn.close()
    with pytest.raises(StoreVersionError, match="not an orkeon store"):
        open_store()
    assert _tables(store_path) == {"customers"}


def test_a_database_of_another_application_is_refused(open_store: Opener, store_path: Path) -> None:
    conn = apsw.Connection(str(store_path))
    conn.execute("PRAGMA application_id = 1234")
    conn.close()
    with pytest.raises(StoreVersionError, match="another application"):
        open_store()


def test_a_file_that_is_not_a_database_is_refused(open_store: Opener, store_path: Path) -> None:
    store_path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a SQLite database"):
        open_store()
