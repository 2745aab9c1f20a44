"""Mailbox leases (``hub.lease`` / ``client.lease``, docs/hub.md "Leases"): a message
taken provisionally is consumed only when confirmed; given back, it is first in its
mailbox again, and while it is held no reader overtakes it."""

from __future__ import annotations

import threading

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import CancelledError, EventAclError, LeaseRevokedError
from orkeon_actors.testing import wait_until

BOX = "agent://c/a"


def _posted(hub: ok.EventHub, *payloads: int) -> None:
    sender = hub.bind("s", "x")
    for payload in payloads:
        sender.post(BOX, payload)


def _drain(hub: ok.EventHub, count: int) -> list[int]:
    reader = hub.bind("c", "a")
    return [reader.wait_for(ok.WaitOnMailbox(BOX), 10).json() for _ in range(count)]


def test_a_confirmed_lease_consumes_its_message(hub: ok.EventHub) -> None:
    hub.register_mailbox(BOX)
    _posted(hub, 1, 2, 3)
    lease = hub.bind("c", "a").lease(BOX, 10)
    assert lease.held and lease.message.json() == 1
    lease.confirm()
    assert not lease.held
    lease.give_back()  # too late: the confirm won
    assert _drain(hub, 2) == [2, 3]


def test_a_given_back_message_is_first_again_in_order(hub: ok.EventHub) -> None:
    hub.register_mailbox(BOX)
    _posted(hub, 1, 2)
    with hub.bind("c", "a").lease(BOX, 10) as lease:
        assert lease.message.json() == 1
        _posted(hub, 3)  # arrives while the lease holds the mailbox
    assert not lease.held
    assert _drain(hub, 3) == [1, 2, 3]


def test_no_reader_overtakes_a_held_lease(hub: ok.EventHub) -> None:
    hub.register_mailbox(BOX)
    _posted(hub, 1, 2)
    lease = hub.bind("c", "a").lease(BOX, 10)
    got: list[int] = []
    reader = threading.Thread(target=lambda: got.extend(_drain(hub, 1)))
    reader.start()
    wait_until(lambda: hub.pending_waits()["on_mailbox"] == 1, what="the second reader waiting")
    assert not got, "a reader took a message while a lease held the mailbox"
    lease.give_back()
    reader.join(10)
    assert got == [1], "the given-back message goes to the waiting reader, before the later one"
    assert _drain(hub, 1) == [2]


def test_a_lease_waits_for_a_post_and_a_timeout_holds_nothing(hub: ok.EventHub) -> None:
    hub.register_mailbox(BOX)
    client = hub.bind("c", "a")
    timed_out = client.lease(BOX, 0.05)
    assert timed_out.message.is_timeout and not timed_out.held
    timed_out.confirm()  # no-ops
    timed_out.give_back()
    leases: list[ok.MailboxLease] = []
    taker = threading.Thread(target=lambda: leases.append(client.lease(BOX, ok.FOREVER)))
    taker.start()
    wait_until(lambda: hub.pending_waits()["on_mailbox"] == 1, what="the lease waiting")
    _posted(hub, 7)
    taker.join(10)
    [lease] = leases
    assert lease.message.json() == 7
    lease.give_back()
    assert _drain(hub, 1) == [7]


def test_a_cancelled_lease_leaves_the_message(hub: ok.EventHub) -> None:
    hub.register_mailbox(BOX)
    client = hub.bind("c", "a")
    token = ok.CancelToken()
    errors: list[BaseException] = []

    def take() -> None:
        try:
            client.lease(BOX, ok.FOREVER, cancel=token)
        except CancelledError as exc:
            errors.append(exc)

    taker = threading.Thread(target=take)
    taker.start()
    wait_until(lambda: hub.pending_waits()["on_mailbox"] == 1, what="the lease waiting")
    token.cancel()
    taker.join(10)
    assert len(errors) == 1
    _posted(hub, 5)
    assert _drain(hub, 1) == [5], "the withdrawn lease took nothing"


def test_only_the_owner_leases_a_mailbox(hub: ok.EventHub) -> None:
    hub.register_mailbox(BOX)
    with pytest.raises(EventAclError):
        hub.bind("other", "a").lease(BOX, 1)


def test_closing_a_leased_mailbox_returns_the_leased_message_first(hub: ok.EventHub) -> None:
    registration = hub.register_mailbox(BOX)
    _posted(hub, 1, 2)
    lease = hub.bind("c", "a").lease(BOX, 10)
    assert [m.json() for m in registration.close()] == [1, 2]
    with pytest.raises(LeaseRevokedError, match="closed while message"):
        lease.confirm()
