"""``Runtime.start(store=..., durability=...)``: settings, and nothing left behind."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import InvalidArgumentError, StoreVersionError
from orkeon_actors.store import Durability, SqliteEventHub, StoreConfig
from orkeon_actors.testing import wait_until
from tests.store.conftest import Opener, durable


def _synchronous(hub: SqliteEventHub) -> int:
    return hub.writer.execute(lambda conn: int(conn.execute("PRAGMA synchronous").fetchone()[0]))  # type: ignore[index]


def test_full_durability_is_the_default_and_normal_is_opt_in(open_store: Opener, tmp_path: Path) -> None:
    full = durable(open_store())
    assert full.config.durability is Durability.FULL and _synchronous(full) == 2
    normal = durable(open_store(store=str(tmp_path / "n.db"), durability="normal"))
    assert normal.config.durability is Durability.NORMAL and _synchronous(normal) == 1
    configured = durable(open_store(store=StoreConfig(str(tmp_path / "c.db"), durability=Durability.NORMAL)))
    assert _synchronous(configured) == 1


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="'full' or 'normal'"):
        ok.Runtime.start(store=str(tmp_path / "x.db"), durability="fast")
    with pytest.raises(InvalidArgumentError, match="only applies to a durable hub"):
        ok.Runtime.start(durability="full")
    with pytest.raises(InvalidArgumentError, match="path of a database file"):
        ok.Runtime.start(store=":memory:")


def test_stop_leaves_no_thread_behind_and_releases_the_store(open_store: Opener) -> None:
    before = set(threading.enumerate())
    rt = open_store()
    hub = durable(rt)
    reg = hub.register_mailbox("agent://c/a")
    hub.bind("c", "x").post("agent://c/a", 1)
    with hub.unit_of_work("c") as uow:
        uow.post("agent://c/a", 2)
    with reg.reader() as reader:
        reader.receive()
    rt.stop()
    wait_until(lambda: not (set(threading.enumerate()) - before), what="every runtime thread to end")
    rt = open_store()
    assert rt.hub.register_mailbox("agent://c/a").depth() == 1


def test_a_store_that_cannot_open_leaves_nothing_running(store_path: Path) -> None:
    import apsw

    conn = apsw.Connection(str(store_path))
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    before = set(threading.enumerate())
    with pytest.raises(StoreVersionError):
        ok.Runtime.start(store=str(store_path))
    wait_until(lambda: not (set(threading.enumerate()) - before), what="every thread of the failed start to end")


def test_the_hub_is_the_durable_adapter(open_store: Opener, store_path: Path) -> None:
    hub = open_store().hub
    assert isinstance(hub, SqliteEventHub)
    assert repr(hub) == f"SqliteEventHub({str(store_path)!r}, durability=full)"
