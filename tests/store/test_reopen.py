"""Reopening a durably registered mailbox (a waking crew's) costs no write, and the posts
racing it are delivered once each, kept ones first (SqliteEventHub._reopen)."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.store import durable_hub
from tests.conftest import Background
from tests.store.conftest import Opener, PausedHandOver, drain, durable

BOX = "agent://crew/worker"


def test_reopening_a_parked_mailbox_commits_nothing_and_delivers_what_was_kept_first(open_store: Opener) -> None:
    hub = durable(open_store())
    sender = hub.bind("sender", "s")
    reg = hub.register_mailbox(BOX)
    sender.post(BOX, "a")
    sender.post(BOX, "b")
    hub.park_mailbox(reg)
    sender.post(BOX, "c")  # kept: nobody holds the mailbox
    transactions = hub.writer.stats.transactions
    again = hub.register_mailbox(BOX)
    assert hub.writer.stats.transactions == transactions
    sender.post(BOX, "d")  # live
    assert drain(again) == ["a", "b", "c", "d"]


def test_a_registration_after_a_restart_reopens_without_a_write_too(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    rt.hub.bind("sender", "s").post(BOX, "before the restart")
    rt.stop()
    hub = durable(open_store())
    transactions = hub.writer.stats.transactions
    reg = hub.register_mailbox(BOX)
    assert hub.writer.stats.transactions == transactions
    assert drain(reg) == ["before the restart"]


def test_a_new_address_is_still_registered_durably(open_store: Opener) -> None:
    hub = durable(open_store())
    transactions = hub.writer.stats.transactions
    hub.register_mailbox(BOX)
    assert hub.writer.stats.transactions == transactions + 1
    assert hub.is_registered(BOX)


@pytest.mark.parametrize("handed_over_while_held", [True, False])
def test_a_post_committed_while_the_mailbox_reopens_is_delivered_once(
    open_store: Opener, monkeypatch: pytest.MonkeyPatch, handed_over_while_held: bool
) -> None:
    """Committed after the handle went live but before the kept rows are read: it is
    both read and handed over by its poster to this handle, either while the handle
    still holds its deliveries or only after the reopen delivered what it read. It
    must count once, after the kept one."""
    hub = durable(open_store())
    sender = hub.bind("sender", "s")
    hub.park_mailbox(hub.register_mailbox(BOX))
    sender.post(BOX, "kept")
    paused = None if handed_over_while_held else PausedHandOver(hub, monkeypatch)
    load = durable_hub.mailboxes.load_messages
    posts: list[Background] = []

    def post_then_load(conn: Any, address: str) -> list[ok.Message]:
        if not posts:
            posts.append(Background(lambda: sender.post(BOX, "during")))
            if paused is None:
                posts[0].get()  # handed over: held
            else:
                assert paused.committed.wait(10)  # committed, captured this handle, not handed over
        return load(conn, address)

    monkeypatch.setattr(durable_hub.mailboxes, "load_messages", post_then_load)
    reg = hub.register_mailbox(BOX)
    if paused is not None:
        paused.release.set()
    posts[0].get()
    monkeypatch.undo()
    assert drain(reg) == ["kept", "during"]


@pytest.mark.parametrize("parked_before_commit", [True, False])
def test_a_post_handed_over_after_the_reopen_is_read_from_the_store_once(
    open_store: Opener, monkeypatch: pytest.MonkeyPatch, parked_before_commit: bool
) -> None:
    """The poster committed before the reopen (capturing no live mailbox, or the one
    parked since) and hands over after it: the poster is not told of an error, the
    reopened mailbox has the message from the store, once."""
    hub = durable(open_store())
    reg = hub.register_mailbox(BOX)
    if parked_before_commit:
        hub.park_mailbox(reg)
    paused = PausedHandOver(hub, monkeypatch)
    post = Background(lambda: hub.bind("sender", "s").post(BOX, "racing"))
    assert paused.committed.wait(10)
    if not parked_before_commit:
        hub.park_mailbox(reg)
    again = hub.register_mailbox(BOX)
    paused.release.set()
    post.get()  # no MailboxNotFoundError: the message was kept
    monkeypatch.undo()
    assert drain(again) == ["racing"]
