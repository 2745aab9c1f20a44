"""The in-memory mailbox's direct mode (a held reader gets posts pushed straight from the
poster's thread) must never let a post overtake one still in the actor's inbox.

These tests stall the mailbox actor inside the reader's buffer at chosen points, so the
dangerous interleavings happen every run instead of by chance.
"""

from __future__ import annotations

import threading

import orkeon_actors as ok
from orkeon_actors.hub.memory import InMemoryEventHub
from orkeon_actors.hub.waiter import LocalBuffer
from orkeon_actors.model.message import Message
from orkeon_actors.testing import wait_until


class _StallingBuffer(LocalBuffer[Message]):
    """Blocks the pushing thread (the mailbox actor) at two chosen points. When the actor
    runs on the test's own thread (the caller-runs executor), only that thread could
    release it: the stall is skipped instead of timing out after 10 s, and the test still
    checks the order the posts arrive in."""

    def __init__(self, stall_single_push_of: int) -> None:
        super().__init__()
        self.flush_entered = threading.Event()
        self.release_flush = threading.Event()
        self.push_entered = threading.Event()
        self.release_push = threading.Event()
        self._stall_value = stall_single_push_of
        self._releaser = threading.get_ident()

    def _stall(self, release: threading.Event) -> None:
        if threading.get_ident() != self._releaser:
            release.wait(10)

    def push_many(self, items: list[Message]) -> bool:
        self.flush_entered.set()
        self._stall(self.release_flush)
        return super().push_many(items)

    def push(self, item: Message) -> bool:
        if item.json() == self._stall_value:
            self.push_entered.set()
            self._stall(self.release_push)
        return super().push(item)

    def contents(self) -> list[object]:
        out = []
        while (item := self.take_nowait()) is not None:
            out.append(item.json())
        return out


def test_posts_made_while_the_actor_catches_up_wait_behind_its_inbox() -> None:
    with ok.Runtime.start() as rt:
        hub = rt.hub
        assert isinstance(hub, InMemoryEventHub)
        hub.register_mailbox("agent://c/a")
        handle = hub.live_mailbox(ok.MailboxAddress.parse("agent://c/a"))
        assert handle is not None
        poster = hub.bind("p", "x")
        poster.post("agent://c/a", 0)  # queued in the actor: no reader yet
        wait_until(lambda: handle.in_flight == 0, what="message 0 queued")

        buffer = _StallingBuffer(stall_single_push_of=1)
        handle.attach(buffer)
        assert buffer.flush_entered.wait(10)  # the actor is inside the attach, flushing [0]
        poster.post("agent://c/a", 1)  # still told: in the actor's inbox behind the attach
        poster.post("agent://c/a", 2)
        buffer.release_flush.set()
        assert buffer.push_entered.wait(10)  # the actor is pushing 1; 2 is still in its inbox
        poster.post("agent://c/a", 3)  # must not overtake 1 and 2
        buffer.release_push.set()
        wait_until(lambda: handle.in_flight == 0 and not handle.staged, what="the inbox to drain")
        poster.post("agent://c/a", 4)  # direct now
        assert buffer.contents() == [0, 1, 2, 3, 4]


def test_a_reader_leaving_while_posts_are_staged_hands_everything_back_in_order() -> None:
    with ok.Runtime.start() as rt:
        hub = rt.hub
        assert isinstance(hub, InMemoryEventHub)
        reg = hub.register_mailbox("agent://c/a")
        handle = hub.live_mailbox(ok.MailboxAddress.parse("agent://c/a"))
        assert handle is not None
        poster = hub.bind("p", "x")
        poster.post("agent://c/a", 0)
        wait_until(lambda: handle.in_flight == 0, what="message 0 queued")

        buffer = _StallingBuffer(stall_single_push_of=1)
        handle.attach(buffer)
        assert buffer.flush_entered.wait(10)
        poster.post("agent://c/a", 1)
        buffer.release_flush.set()
        assert buffer.push_entered.wait(10)
        poster.post("agent://c/a", 2)  # staged
        handle.detach(buffer)  # the reader leaves with 0 unconsumed, 1 still being pushed
        buffer.release_push.set()
        poster.post("agent://c/a", 3)
        consumer = hub.bind("c", "a")
        got = [consumer.wait_for(ok.WaitOnMailbox("agent://c/a"), 10).json() for _ in range(4)]
        assert got == [0, 1, 2, 3]
        assert reg.depth() == 0
