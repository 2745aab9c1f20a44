"""Mailboxes are caller-runs actors (orkeon_actors.actors.caller_runs): what a post to an
idle mailbox causes happens on the poster's thread before ``post`` returns, and no turn
ever runs under the handle's lock."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import orkeon_actors as ok
from orkeon_actors.actors import deferred_turns
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.message import Message


@pytest.fixture
def handle() -> MailboxHandle:
    return MailboxHandle(MailboxAddress.parse("agent://c/a"), owner=None)


@pytest.fixture
def hub() -> Iterator[ok.EventHub]:
    rt = ok.Runtime.start()
    yield rt.hub
    rt.stop()


def _message(hub: ok.EventHub, n: int) -> Message:
    return hub.bind("s", "x").publish("t", n)


def test_a_post_completes_a_waiting_consumer_on_the_posters_thread(handle: MailboxHandle, hub: ok.EventHub) -> None:
    settled_on: list[int] = []
    waiter: Waiter[Message] = Waiter()
    waiter.on_settled = lambda: settled_on.append(threading.get_ident())
    handle.add_waiter(waiter)
    message = _message(hub, 1)
    handle.deliver(message)
    assert waiter.peek() == (True, message, None)  # before deliver returned
    assert settled_on == [threading.get_ident()]
    assert handle.close() == []


def test_a_consumer_settled_by_a_post_may_call_back_into_the_same_mailbox(
    handle: MailboxHandle, hub: ok.EventHub
) -> None:
    first: Waiter[Message] = Waiter()
    again: Waiter[Message] = Waiter()
    # Its callback runs in the mailbox's turn; it re-enters the handle (lock, tell).
    first.on_settled = lambda: handle.add_waiter(again)
    handle.add_waiter(first)
    one, two = _message(hub, 1), _message(hub, 2)
    handle.deliver(one)
    handle.deliver(two)
    assert first.peek()[1] is one and again.peek()[1] is two
    assert handle.depth() == 0
    handle.close()


@pytest.mark.parametrize("call", ["close", "depth"])
def test_waiting_on_a_mailbox_inside_a_deferred_block_fails_at_once(handle: MailboxHandle, call: str) -> None:
    with deferred_turns(), pytest.raises(RuntimeError, match=rf"{call}\(\).*deferred_turns\(\) block.*after the block"):
        getattr(handle, call)()
    assert handle.depth() == 0  # after the block: answered
    assert handle.close() == []
