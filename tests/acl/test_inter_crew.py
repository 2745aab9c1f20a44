"""Spec §16.3 (inter-crew) and §10.1 (filtering at delivery): the cross-crew leak suite."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import orkeon_actors as ok
from orkeon_actors.testing import wait_until
from tests.acl.conftest import World, outbound


def test_send_a_to_b_allowed_by_a_crew_link_is_delivered(
    world: World, background: Callable[[Callable[[], object]], object]
) -> None:
    a = world.crew("crew-a", [outbound("crew-b")])
    b = world.crew("crew-b")
    task = background(lambda: a.client.send(b.address, {"question": 1}, timeout=30))
    request = b.client.wait_for(ok.WaitOnMailbox(b.address), 30)
    assert request.source_crew_id == a.id and request.json() == {"question": 1}
    assert request.correlation_id is not None
    b.client.reply(request.correlation_id, {"answer": 2})
    reply = task.get()  # type: ignore[attr-defined]
    assert reply.json() == {"answer": 2}


def test_send_a_to_b_without_a_crew_link_raises_event_acl_error(world: World) -> None:
    a = world.crew("crew-a", [outbound("crew-c")])
    b = world.crew("crew-b")
    with pytest.raises(ok.errors.EventAclError) as info:
        a.client.send(b.address, {"question": 1}, timeout=30)
    assert info.value.rule == "declared-no-link"
    assert b.mailbox.depth() == 0


def test_publish_scoped_to_b_never_reaches_a_subscriber_in_c(world: World) -> None:
    a = world.crew("crew-a", [outbound("crew-b")])
    b = world.crew("crew-b")
    c = world.crew("crew-c")
    in_b = world.subscribe(b, "orders.*")
    in_c = [world.subscribe(c, pattern) for pattern in ("orders.created", "orders.*", "#", "orders.#")]
    observer = world.hub.system.subscribe("#")
    try:
        scoped = a.client.publish("orders.created", {"n": 1}, ok.PublishOptions(target_crew_id=b.id))
        assert in_b.drain() == [scoped]
        assert all(sub.drain() == [] for sub in in_c)
        assert observer.drain() == [scoped], "a system subscriber is an unscoped observer"
        broadcast = a.client.publish("orders.created", {"n": 2})
        assert all(sub.drain() == [broadcast] for sub in in_c), "global publishes still reach C"
    finally:
        observer.close()


def test_cross_crew_leak_non_regression(world: World) -> None:
    """Every path a message takes to a consumer, with crews that are all allowed to talk:
    the ACL letting a message through never widens who receives it."""
    a = world.crew("crew-a", [outbound("crew-b"), outbound("crew-c")])
    b = world.crew("crew-b")
    c = world.crew("crew-c")
    subs = {crew.name: world.subscribe(crew, "#") for crew in (a, b, c)}

    # A scoped topic wait in C is not completed by a message scoped to B.
    result: list[ok.Message] = []
    waiting = world.hub.bind(c.id, "waiter")
    thread = threading.Thread(
        target=lambda: result.append(waiting.wait_for(ok.WaitOnTopic("orders.#"), ok.FOREVER)), daemon=True
    )
    thread.start()
    wait_until(lambda: world.hub.pending_waits()["on_topic"] == 1, what="the topic wait of crew C")
    to_b = a.client.publish("orders.created", b"for b", ok.PublishOptions(target_crew_id=b.id))
    to_c = a.client.publish("orders.created", b"for c", ok.PublishOptions(target_crew_id=c.id))
    thread.join(30)
    assert result == [to_c]

    # Subscriptions: each crew sees its own scoped messages and nothing else.
    assert subs["crew-a"].drain() == []
    assert subs["crew-b"].drain() == [to_b]
    assert subs["crew-c"].drain() == [to_c]

    # Mailboxes: a post reaches its mailbox only; no subscriber sees mailbox traffic.
    posted = a.client.post(b.address, b"mail for b")
    assert b.mailbox.depth() == 1 and c.mailbox.depth() == 0 and a.mailbox.depth() == 0
    assert all(sub.drain() == [] for sub in subs.values())
    assert posted.target_crew_id == b.id

    # Retained last values: the scoped slot is B's.
    retained = ok.PublishOptions(target_crew_id=b.id, retain_as_last_value=True, last_value_key="status")
    kept = a.client.publish("orders.status", b"b-status", retained)
    assert b.client.get_last_value("status", crew_scope=b.id) == kept
    assert c.client.get_last_value("status", crew_scope=c.id) is None
    assert c.client.get_last_value("status") is None
    assert subs["crew-c"].drain() == [] and subs["crew-b"].drain() == [kept]

    # The closed mailbox of B gives back exactly what was posted to it.
    assert [m.id for m in b.mailbox.close()] == [posted.id]
