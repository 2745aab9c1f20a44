"""Post and mailboxes (spec §4, §6.2, §10.4, §16.1)."""

from __future__ import annotations

import threading

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import MailboxAlreadyRegisteredError, MailboxNotFoundError
from orkeon_actors.testing import wait_until
from tests.conftest import Background


def test_post_to_an_unregistered_mailbox_is_a_typed_error(hub: ok.EventHub) -> None:
    with pytest.raises(MailboxNotFoundError, match="register_mailbox"):
        hub.bind("c", "a").post("agent://nobody/here", 1)


def test_post_is_consumed_by_a_mailbox_wait_with_stamped_fields(hub: ok.EventHub) -> None:
    hub.register_mailbox("agent://c2/b")
    sent = hub.bind("c1", "a").post("agent://c2/b", {"hello": 1}, metadata={"k": "v"})
    got = hub.bind("c2", "b").wait_for(ok.WaitOnMailbox("agent://c2/b"), 5)
    assert got == sent
    assert got.target_mailbox == ok.MailboxAddress.parse("agent://c2/b")
    assert got.target_crew_id == "c2", "derived from the mailbox (spec §6.1)"
    assert (got.source_crew_id, got.source_agent_id) == ("c1", "a")
    assert got.correlation_id is None and got.schema_id == ok.NO_DECLARED_SCHEMA_ID


def test_mailbox_fifo_with_100_messages(hub: ok.EventHub) -> None:
    reg = hub.register_mailbox("agent://c/a")
    sender = hub.bind("s", "x")
    for i in range(100):
        sender.post("agent://c/a", i)
    with reg.reader() as reader:
        assert [reader.receive().json() for _ in range(100)] == list(range(100))


def test_each_message_goes_to_exactly_one_consumer(hub: ok.EventHub) -> None:
    hub.register_mailbox("crew://c")
    consumer = hub.bind("c", "a")
    results: list[int] = []
    lock = threading.Lock()

    def take(n: int) -> None:
        for _ in range(n):
            message = consumer.wait_for(ok.WaitOnMailbox("crew://c"), 10)
            with lock:
                results.append(message.json())

    threads = [threading.Thread(target=take, args=(50,)) for _ in range(4)]
    for t in threads:
        t.start()
    sender = hub.bind("s", "x")
    for i in range(200):
        sender.post("crew://c", i)
    for t in threads:
        t.join()
    assert sorted(results) == list(range(200))


def test_fifo_per_poster_with_several_posting_threads(hub: ok.EventHub) -> None:
    reg = hub.register_mailbox("agent://c/a")
    posters = [hub.bind(f"p{i}", "x") for i in range(4)]

    def post_many(client: ok.HubClient) -> None:
        for i in range(150):
            client.post("agent://c/a", {"from": str(client.crew_id), "i": i})

    threads = [threading.Thread(target=post_many, args=(c,)) for c in posters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with reg.reader() as reader:
        got = [reader.receive().json() for _ in range(600)]
    for p in posters:
        assert [g["i"] for g in got if g["from"] == str(p.crew_id)] == list(range(150))
    assert reg.depth() == 0


def test_posting_to_a_topic_address_publishes_on_that_topic(hub: ok.EventHub) -> None:
    sub = hub.bind("c", "a").subscribe("alerts.*")
    sent = hub.bind("p", "a").post("topic://alerts.fire", {"level": 3})
    (got,) = sub.drain()
    assert got.id == sent.id and got.topic == "alerts.fire" and got.target_crew_id is None


def test_a_topic_address_cannot_be_registered_as_a_mailbox(hub: ok.EventHub) -> None:
    with pytest.raises(ok.errors.InvalidArgumentError, match="subscribe"):
        hub.register_mailbox("topic://alerts")


def test_registering_twice_is_refused_and_the_first_registration_keeps_working(hub: ok.EventHub) -> None:
    first = hub.register_mailbox("client://studio")
    with pytest.raises(MailboxAlreadyRegisteredError, match=r"client://studio.*close the existing registration"):
        hub.register_mailbox("client://studio")
    sent = hub.bind("s", "x").post("client://studio", "still mine")
    with first.reader() as reader:
        assert reader.receive().id == sent.id


def test_closing_a_mailbox_hands_back_unconsumed_messages(hub: ok.EventHub) -> None:
    reg = hub.register_mailbox("agent://c/a")
    sender = hub.bind("s", "x")
    sent = [sender.post("agent://c/a", i).id for i in range(5)]
    assert reg.depth() == 5
    assert [m.id for m in reg.close()] == sent
    with pytest.raises(MailboxNotFoundError):
        sender.post("agent://c/a", 6)
    hub.register_mailbox("agent://c/a")  # the address is free again


def test_unregister_while_posting_never_swallows_a_message(hub: ok.EventHub) -> None:
    """Each post either raises MailboxNotFoundError or is handed back/consumed."""
    reg = hub.register_mailbox("agent://c/a")
    sender = hub.bind("s", "x")
    accepted: list[str] = []
    refused = 0
    stop = threading.Event()

    def post_until_refused() -> None:
        nonlocal refused
        i = 0
        while not stop.is_set():
            try:
                accepted.append(sender.post("agent://c/a", i).id)
            except MailboxNotFoundError:
                refused += 1
                return
            i += 1

    poster = threading.Thread(target=post_until_refused)
    poster.start()
    wait_until(lambda: len(accepted) >= 200, what="some accepted posts")
    leftovers = reg.close()
    poster.join(10)
    stop.set()
    assert refused == 1
    assert [m.id for m in leftovers] == accepted


def test_reader_hands_back_what_it_did_not_consume_in_order(hub: ok.EventHub) -> None:
    reg = hub.register_mailbox("agent://c/a")
    sender = hub.bind("s", "x")
    for i in range(10):
        sender.post("agent://c/a", i)
    reader = reg.reader()
    assert [reader.receive().json() for _ in range(3)] == [0, 1, 2]
    reader.close()
    for i in range(10, 12):
        sender.post("agent://c/a", i)
    consumer = hub.bind("c", "a")
    got = [consumer.wait_for(ok.WaitOnMailbox("agent://c/a"), 5).json() for _ in range(9)]
    assert got == list(range(3, 12))


def test_reader_receive_is_cancellable_and_iteration_ends_on_close(
    hub: ok.EventHub, background: type[Background]
) -> None:
    reg = hub.register_mailbox("agent://c/a")
    reader = reg.reader()
    token = ok.CancelToken()
    job = background(lambda: reader.receive(cancel=token))
    token.cancel()
    with pytest.raises(ok.errors.CancelledError):
        job.get()
    iteration = background(lambda: list(reader))
    reg.close()
    assert iteration.get() == []


def test_receive_on_a_closed_mailbox_raises(hub: ok.EventHub, background: type[Background]) -> None:
    reg = hub.register_mailbox("agent://c/a")
    reader = reg.reader()
    job = background(reader.receive)
    reg.close()
    with pytest.raises(MailboxNotFoundError):
        job.get()


def test_readers_coming_and_going_under_concurrent_posts_keep_fifo_and_lose_nothing(hub: ok.EventHub) -> None:
    """A held reader switches the mailbox to direct pushes; taking a reader on and
    letting it go while several threads post must keep each poster's order."""
    reg = hub.register_mailbox("agent://c/a")
    posters = [hub.bind(f"p{i}", "x") for i in range(3)]
    per_poster = 400
    received: list[dict[str, object]] = []
    done_posting = threading.Event()

    def post_many(client: ok.HubClient) -> None:
        for i in range(per_poster):
            client.post("agent://c/a", {"from": str(client.crew_id), "i": i})

    threads = [threading.Thread(target=post_many, args=(c,)) for c in posters]
    for t in threads:
        t.start()
    consumer = hub.bind("c", "a")
    while len(received) < 3 * per_poster:
        with reg.reader() as reader:  # a short-lived reader: takes a few, hands the rest back
            for _ in range(min(7, 3 * per_poster - len(received))):
                received.append(reader.receive().json())
        if len(received) < 3 * per_poster:
            received.append(consumer.wait_for(ok.WaitOnMailbox("agent://c/a"), 10).json())
    for t in threads:
        t.join()
    done_posting.set()
    assert len(received) == 3 * per_poster
    for p in posters:
        assert [r["i"] for r in received if r["from"] == str(p.crew_id)] == list(range(per_poster))
    assert reg.depth() == 0


def test_several_mailboxes_register_all_or_none_and_close_together(hub: ok.EventHub) -> None:
    hub.register_mailbox("agent://c/taken")
    with pytest.raises(MailboxAlreadyRegisteredError):
        hub.register_mailboxes(["crew://c", "agent://c/taken"])
    with pytest.raises(MailboxNotFoundError):  # none of them stayed registered
        hub.bind("s", "x").post("crew://c", 0)
    crew, agent = hub.register_mailboxes(["crew://c", "agent://c/a"])
    assert (str(crew.address), str(agent.address)) == ("crew://c", "agent://c/a")
    sender = hub.bind("s", "x")
    to_crew = [sender.post("crew://c", i).id for i in range(3)]
    to_agent = [sender.post("agent://c/a", i).id for i in range(2)]
    leftovers = hub.close_mailboxes([crew, agent])
    assert [[m.id for m in kept] for kept in leftovers] == [to_crew, to_agent]
    for address in ("crew://c", "agent://c/a"):
        with pytest.raises(MailboxNotFoundError):
            sender.post(address, "late")
    hub.register_mailboxes(["crew://c", "agent://c/a"])  # the addresses are free again
