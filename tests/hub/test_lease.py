"""Mailbox leases beyond the contract suite: the receive stages on a given-back
message, a held reader taken while a lease holds the mailbox, and the order property
over any sequence of posts, confirms and give-backs (docs/hub.md "Leases")."""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.middleware import IdempotencyMiddleware

BOX = "agent://c/a"


def test_a_given_back_message_passes_the_idempotency_stage_again() -> None:
    with ok.Runtime.start(middleware=[IdempotencyMiddleware()]) as rt:
        rt.hub.register_mailbox(BOX)
        rt.hub.bind("s", "x").post(BOX, "once")
        client = rt.hub.bind("c", "a")
        client.lease(BOX, 5).give_back()
        again = client.lease(BOX, 5)
        assert again.held and again.message.json() == "once", "the stage dropped the given-back message"
        again.confirm()
        assert client.wait_for(ok.WaitOnMailbox(BOX), 0.05).is_timeout


def test_a_reader_opened_during_a_lease_starts_with_the_given_back_message() -> None:
    with ok.Runtime.start() as rt:
        registration = rt.hub.register_mailbox(BOX)
        sender = rt.hub.bind("s", "x")
        sender.post(BOX, 1)
        lease = rt.hub.bind("c", "a").lease(BOX, 5)
        sender.post(BOX, 2)
        with registration.reader() as reader:
            sender.post(BOX, 3)
            lease.give_back()
            assert [reader.receive().json() for _ in range(3)] == [1, 2, 3]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["post", "confirm", "give_back"]), max_size=40))
def test_confirmed_leases_consume_in_post_order_and_nothing_is_lost(operations: list[str]) -> None:
    with ok.Runtime.start() as rt:
        rt.hub.register_mailbox(BOX)
        sender, reader = rt.hub.bind("s", "x"), rt.hub.bind("c", "a")
        waiting: deque[int] = deque()
        consumed: list[int] = []
        posted = 0
        for operation in operations:
            if operation == "post":
                sender.post(BOX, posted)
                waiting.append(posted)
                posted += 1
            elif waiting:
                lease = reader.lease(BOX, 5)
                assert lease.message.json() == waiting[0], "a lease did not take the oldest message"
                if operation == "confirm":
                    lease.confirm()
                    consumed.append(waiting.popleft())
                else:
                    lease.give_back()
        rest = [reader.wait_for(ok.WaitOnMailbox(BOX), 5).json() for _ in waiting]
        assert consumed + rest == list(range(posted))
