"""Reopening a durably registered mailbox (a waking crew's) costs no write, and the posts
racing it are delivered once each, kept ones first (SqliteEventHub._reopen)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.store import durable_hub
from tests.conftest import Background
from tests.store.conftest import Opener, durable

BOX = "agent://crew/worker"


def _drain(reg: ok.MailboxRegistration) -> list[object]:
    out = []
    with reg.reader() as reader:
        while reg.depth() > 0:
            out.append(reader.receive().json())
    return out


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
    assert _drain(again) == ["a", "b", "c", "d"]


def test_a_registration_after_a_restart_reopens_without_a_write_too(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    rt.hub.bind("sender", "s").post(BOX, "before the restart")
    rt.stop()
    hub = durable(open_store())
    transactions = hub.writer.stats.transactions
    reg = hub.register_mailbox(BOX)
    assert hub.writer.stats.transactions == transactions
    assert _drain(reg) == ["before the restart"]


def test_a_new_address_is_still_registered_durably(open_store: Opener) -> None:
    hub = durable(open_store())
    transactions = hub.writer.stats.transactions
    hub.register_mailbox(BOX)
    assert hub.writer.stats.transactions == transactions + 1
    assert hub.is_registered(BOX)


def test_a_post_committed_while_the_mailbox_reopens_is_delivered_once(
    open_store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Committed after the handle went live but before the kept rows are read: it is
    both read and delivered live (held), and must count once, after the kept one."""
    hub = durable(open_store())
    sender = hub.bind("sender", "s")
    hub.park_mailbox(hub.register_mailbox(BOX))
    sender.post(BOX, "kept")
    load = durable_hub.mailboxes.load_messages
    raced: list[Any] = []

    def post_then_load(conn: Any, address: str) -> list[ok.Message]:
        if not raced:
            raced.append(Background(lambda: sender.post(BOX, "during")).get())
        return load(conn, address)

    monkeypatch.setattr(durable_hub.mailboxes, "load_messages", post_then_load)
    reg = hub.register_mailbox(BOX)
    monkeypatch.undo()
    assert raced
    assert _drain(reg) == ["kept", "during"]


def test_a_post_reloaded_and_handed_over_by_its_poster_after_the_reopen_is_delivered_once(
    open_store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Committed after the handle went live and before the kept rows are read, but its
    poster hands it over only after the reopen delivered what it read: once."""
    hub = durable(open_store())
    sender = hub.bind("sender", "s")
    hub.park_mailbox(hub.register_mailbox(BOX))
    sender.post(BOX, "kept")
    committed, release = threading.Event(), threading.Event()
    hand_over = hub._hand_to_live

    def paused(message: ok.Message, handle: Any) -> None:
        committed.set()
        release.wait(10)
        hand_over(message, handle)

    load = durable_hub.mailboxes.load_messages
    posts: list[Background] = []

    def post_then_load(conn: Any, address: str) -> list[ok.Message]:
        if not posts:
            posts.append(Background(lambda: sender.post(BOX, "during")))
            assert committed.wait(10)  # committed, captured this handle, not handed over
        return load(conn, address)

    monkeypatch.setattr(hub, "_hand_to_live", paused)
    monkeypatch.setattr(durable_hub.mailboxes, "load_messages", post_then_load)
    reg = hub.register_mailbox(BOX)
    release.set()
    posts[0].get()
    monkeypatch.undo()
    assert _drain(reg) == ["kept", "during"]


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
    committed, release = threading.Event(), threading.Event()
    hand_over = hub._hand_to_live

    def paused(message: ok.Message, handle: Any) -> None:
        committed.set()
        release.wait(10)
        hand_over(message, handle)

    monkeypatch.setattr(hub, "_hand_to_live", paused)
    post = Background(lambda: hub.bind("sender", "s").post(BOX, "racing"))
    assert committed.wait(10)
    if not parked_before_commit:
        hub.park_mailbox(reg)
    again = hub.register_mailbox(BOX)
    release.set()
    post.get()  # no MailboxNotFoundError: the message was kept
    monkeypatch.undo()
    assert _drain(again) == ["racing"]
