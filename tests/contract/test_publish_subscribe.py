"""Publish and subscribe (spec §4, §10.1, §16.1): the contract every adapter passes."""

from __future__ import annotations

import threading

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import CancelledError, InvalidArgumentError
from tests.conftest import Background


def test_global_publish_reaches_every_subscriber(hub: ok.EventHub) -> None:
    subs = [hub.bind(crew, "a").subscribe("orders.created") for crew in ("c1", "c2", "c3")]
    watcher = hub.system.subscribe("orders.created")
    sent = hub.bind("c0", "p").publish("orders.created", {"n": 1})
    for sub in [*subs, watcher]:
        assert [m.id for m in sub.drain()] == [sent.id]


def test_scoped_publish_reaches_only_the_target_crew_and_system(hub: ok.EventHub) -> None:
    in_x = hub.bind("x", "a").subscribe("audit.event")
    in_y = hub.bind("y", "a").subscribe("audit.event")
    watcher = hub.system.subscribe("audit.event")
    sent = hub.bind("p", "a").publish("audit.event", 1, ok.PublishOptions(target_crew_id="x"))
    assert sent.target_crew_id == "x"
    assert [m.id for m in in_x.drain()] == [sent.id]
    assert in_y.drain() == []
    assert [m.id for m in watcher.drain()] == [sent.id]


def test_publish_stamps_source_from_the_binding(hub: ok.EventHub) -> None:
    sub = hub.system.subscribe("t")
    sent = hub.bind("crew-a", "agent-1").publish("t", b"raw", ok.PublishOptions(metadata={"k": "v"}, schema_id="s1"))
    (got,) = sub.drain()
    assert got == sent
    assert (got.source_crew_id, got.source_agent_id) == ("crew-a", "agent-1")
    assert got.payload == b"raw" and got.metadata == {"k": "v"} and got.schema_id == "s1"
    assert got.published_at.tzinfo is not None and got.published_at.utcoffset().total_seconds() == 0


def test_payloads_that_are_not_bytes_are_json_encoded(hub: ok.EventHub) -> None:
    sub = hub.system.subscribe("t")
    hub.bind("c", "a").publish("t", {"a": [1, None, "é"]})
    (got,) = sub.drain()
    assert got.json() == {"a": [1, None, "é"]}
    with pytest.raises(InvalidArgumentError, match="JSON"):
        hub.bind("c", "a").publish("t", object())


def test_agents_cannot_bind_as_the_system(hub: ok.EventHub) -> None:
    with pytest.raises(ok.errors.InvalidIdError, match="reserved"):
        hub.bind(ok.CrewId.SYSTEM, "a")
    assert hub.system.crew_id.is_system


@pytest.mark.parametrize(
    ("pattern", "topic", "matches"),
    [
        ("orders.*", "orders.created", True),
        ("orders.*", "orders", False),
        ("orders.*", "orders.eu.created", False),
        ("orders.#", "orders", True),
        ("orders.#", "orders.eu.created", True),
        ("#", "anything.at.all", True),
        ("*.created", "orders.created", True),
        ("#.created", "created", True),
        ("a.*.c", "a.b.c", True),
        ("a.*.c", "a.c", False),
        ("orders.created", "orders.created", True),
        ("orders.created", "orders.updated", False),
    ],
)
def test_topic_patterns_follow_amqp_semantics(hub: ok.EventHub, pattern: str, topic: str, matches: bool) -> None:
    sub = hub.bind("c", "a").subscribe(pattern)
    hub.bind("p", "a").publish(topic, 1)
    assert len(sub.drain()) == (1 if matches else 0)


@pytest.mark.parametrize("bad", ["", "a..b", "a b", "a.*", "orders.#"])
def test_publish_refuses_invalid_topic_names(hub: ok.EventHub, bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="topic"):
        hub.bind("c", "a").publish(bad, 1)


def test_subscription_iterates_in_order_and_ends_on_close(hub: ok.EventHub, background: type[Background]) -> None:
    sub = hub.bind("c", "a").subscribe("t.*")
    received: list[int] = []

    def consume() -> None:
        for message in sub:
            received.append(message.json())

    job = background(consume)
    publisher = hub.bind("p", "a")
    for i in range(50):
        publisher.publish("t.x", i)
    from orkeon_actors.testing import wait_until

    wait_until(lambda: len(received) == 50, what="50 messages consumed")
    sub.close()
    job.get()
    assert received == list(range(50))
    assert sub.closed
    assert list(sub) == []


def test_subscription_ends_cleanly_when_its_cancel_token_fires(hub: ok.EventHub, background: type[Background]) -> None:
    token = ok.CancelToken()
    sub = hub.bind("c", "a").subscribe("t", cancel=token)
    job = background(lambda: list(sub))
    token.cancel()
    assert job.get() == []


def test_subscribe_with_a_cancelled_token_raises(hub: ok.EventHub) -> None:
    token = ok.CancelToken()
    token.cancel()
    with pytest.raises(CancelledError):
        hub.bind("c", "a").subscribe("t", cancel=token)


def test_subscription_is_a_context_manager(hub: ok.EventHub) -> None:
    with hub.bind("c", "a").subscribe("t") as sub:
        hub.bind("p", "a").publish("t", 1)
        assert len(sub.drain()) == 1
    hub.bind("p", "a").publish("t", 2)
    assert sub.closed and sub.drain() == []


def test_no_lost_wakeup_for_a_subscription_racing_publishers(hub: ok.EventHub) -> None:
    """Whatever is published after subscribe() returned is seen, exactly once."""
    sub = hub.bind("c", "a").subscribe("race")
    publishers = [hub.bind(f"p{i}", "a") for i in range(4)]
    start = threading.Barrier(4)

    def publish_many(client: ok.HubClient) -> None:
        start.wait()
        for i in range(100):
            client.publish("race", {"from": str(client.crew_id), "i": i})

    threads = [threading.Thread(target=publish_many, args=(c,)) for c in publishers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [m.json() for m in sub.drain()]
    assert len(got) == 400
    for p in publishers:
        mine = [g["i"] for g in got if g["from"] == str(p.crew_id)]
        assert mine == list(range(100)), "FIFO per publisher per subscriber"
