"""The mailbox store remembers addresses read unregistered (so a fleet host's posts to
another host's mailboxes stop asking SQLite several times per post), and never answers
"no" for an address registered since: every registration forgets every such answer."""

from __future__ import annotations

from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.store.absent_cache import AbsentAddresses

from .conftest import Opener, durable

BOX = MailboxAddress.parse("agent://billing/scorer")


def test_an_address_registered_after_it_was_read_unregistered_exists_at_once(open_store: Opener) -> None:
    rt = open_store()
    store = durable(rt).mailbox_store
    assert not store.exists(BOX)
    assert store.absent.known_absent(BOX)  # remembered: the next check asks no reader
    assert not store.exists(BOX)

    rt.hub.register_mailbox(str(BOX))
    assert store.exists(BOX)
    rt.hub.bind("sales", "alice").post(str(BOX), {"n": 1})
    assert rt.hub.is_registered(BOX)


def test_a_registration_of_another_address_forgets_every_answer(open_store: Opener) -> None:
    rt = open_store()
    store = durable(rt).mailbox_store
    other = MailboxAddress.parse("agent://billing/other")
    assert not store.exists(BOX)
    rt.hub.register_mailbox(str(other))
    assert not store.absent.known_absent(BOX)
    assert not store.exists(BOX)  # read again, still unregistered


def test_an_answer_read_across_a_registration_is_not_remembered() -> None:
    absent = AbsentAddresses()
    generation = absent.generation()  # a reader starts ...
    absent.registering()  # ... a registration is submitted meanwhile ...
    absent.remember(BOX, generation)  # ... so its "no" may predate the commit
    assert not absent.known_absent(BOX)


def test_the_remembered_answers_are_bounded() -> None:
    absent = AbsentAddresses(capacity=2)
    boxes = [MailboxAddress.parse(f"agent://c/a{i}") for i in range(3)]
    for box in boxes:
        absent.remember(box, absent.generation())
    assert [absent.known_absent(box) for box in boxes] == [False, True, True]
