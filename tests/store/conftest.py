"""Fixtures of the durable store tests: runtimes opened (and reopened) on one file."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.store import SqliteEventHub

Opener = Callable[..., ok.Runtime]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def open_store(store_path: Path) -> Iterator[Opener]:
    """``open_store(**kwargs)`` starts a runtime on ``store_path``; every runtime it
    started is stopped at teardown (stopping twice is harmless)."""
    started: list[ok.Runtime] = []

    def open_(**kwargs: Any) -> ok.Runtime:
        kwargs.setdefault("store", str(store_path))
        rt = ok.Runtime.start(**kwargs)
        started.append(rt)
        return rt

    yield open_
    for rt in reversed(started):
        rt.stop()


def durable(rt: ok.Runtime) -> SqliteEventHub:
    assert isinstance(rt.hub, SqliteEventHub)
    return rt.hub


def drain(reg: ok.MailboxRegistration) -> list[object]:
    """Every message of ``reg`` (through a held reader), as JSON values, in order."""
    out = []
    with reg.reader() as reader:
        while reg.depth() > 0:
            out.append(reader.receive().json())
    return out


class PausedHandOver:
    """Pauses every post of ``hub`` between its commit and its hand-over to the live
    mailbox (``SqliteMailboxStore.hand_to_live``): ``committed`` is set once one committed,
    and the hand-over waits for ``release``."""

    def __init__(self, hub: SqliteEventHub, monkeypatch: pytest.MonkeyPatch) -> None:
        self.committed = threading.Event()
        self.release = threading.Event()
        hand_over = hub.mailbox_store.hand_to_live

        def paused(message: ok.Message, handle: Any) -> None:
            self.committed.set()
            self.release.wait(10)
            hand_over(message, handle)

        monkeypatch.setattr(hub.mailbox_store, "hand_to_live", paused)
