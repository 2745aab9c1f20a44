"""The WAL is checkpointed by a thread of its own, never inside a commit
(orkeon_actors.store.checkpointer)."""

from __future__ import annotations

import threading

import apsw
import pytest

import orkeon_actors as ok
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.store import StoreConfig
from orkeon_actors.store.checkpointer import Checkpointer
from orkeon_actors.testing import wait_until
from tests.store.conftest import Opener, durable

BOX = "agent://crew/worker"


def test_commits_never_checkpoint_the_checkpointer_does(open_store: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the checkpointer held, the WAL grows past SQLite's own automatic threshold
    (1,000 pages) without any commit resetting it; released, it checkpoints and the WAL
    starts over."""
    reported: list[int] = []
    gate = threading.Event()
    hook, run = Checkpointer.wal_hook, Checkpointer._run

    def spy(self: Checkpointer, conn: apsw.Connection, database: str, pages: int) -> int:
        reported.append(pages)
        return hook(self, conn, database, pages)

    def held(self: Checkpointer) -> None:
        gate.wait(60)
        run(self)

    monkeypatch.setattr(Checkpointer, "wal_hook", spy)
    monkeypatch.setattr(Checkpointer, "_run", held)
    hub = durable(open_store())
    reg = hub.register_mailbox(BOX)
    sender = hub.bind("sender", "s")
    posted = 0
    while posted < 2000 and (not reported or reported[-1] <= 1100):
        sender.post(BOX, {"i": posted, "pad": "x" * 3000})
        posted += 1
    assert reported and reported[-1] > 1100
    assert reported == sorted(reported)  # no commit reset the WAL
    gate.set()
    wait_until(lambda: hub.checkpointer.checkpoints >= 1, what="a background checkpoint")
    sender.post(BOX, "after the checkpoint")
    assert reported[-1] < 1100  # the WAL started over
    assert reg.depth() == posted + 1


def test_what_was_committed_survives_stop_and_the_checkpointer_thread_ends(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    for i in range(50):
        rt.hub.bind("sender", "s").post(BOX, i)
    rt.stop()
    assert not [t for t in threading.enumerate() if t.name == "orkeon-checkpointer"]
    with ok.Runtime.start(store=rt.hub.config.path) as again:  # type: ignore[attr-defined]
        assert again.hub.register_mailbox(BOX).depth() == 50
        assert durable(again).readers.query("PRAGMA integrity_check") == [("ok",)]


@pytest.mark.parametrize("pages", [0, -1, True, 1.5])
def test_checkpoint_pages_must_be_a_positive_int(pages: object) -> None:
    with pytest.raises(InvalidArgumentError, match="checkpoint_pages must be a positive int"):
        StoreConfig("state.db", checkpoint_pages=pages)  # type: ignore[arg-type]
