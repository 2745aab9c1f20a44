"""The Studio's tap: every publish-path operation, refusal, receipt and timeout becomes a
feed event; the pending waits table follows the hub; nothing is built while nobody watches."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, RestrictiveCrewLinkPolicy
from orkeon_actors.errors import EventAclError
from orkeon_actors.studio import StudioTap
from orkeon_actors.studio.feed import FeedSubscriber
from orkeon_actors.testing import wait_until


def _tap(rt: ok.Runtime) -> StudioTap:
    assert rt.studio is not None
    tap = rt.studio.source.tap  # type: ignore[attr-defined]
    assert isinstance(tap, StudioTap)
    return tap


@pytest.fixture
def rt(tmp_path: Any) -> Iterator[ok.Runtime]:
    registry = AclRegistry()
    registry.register_crew("locked", "locked", links=[])
    with ok.Runtime.start(studio=0, middleware=[AclMiddleware(RestrictiveCrewLinkPolicy(registry))]) as runtime:
        yield runtime


def _collect(subscriber: FeedSubscriber, count: int) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    wait_until(lambda: seen.extend(subscriber.take(0.01)) or len(seen) >= count, what=f"{count} feed events")
    return seen


def test_the_tap_joins_the_chain_first_only_while_a_browser_watches(rt: ok.Runtime) -> None:
    hub: Any = rt.hub
    started_with = hub.pipeline
    assert [type(stage) for stage in started_with.stages] == [AclMiddleware]
    first = _tap(rt).feed.attach()
    second = _tap(rt).feed.attach()
    assert [type(stage) for stage in hub.pipeline.stages] == [StudioTap, AclMiddleware]  # first: sees refusals
    first.close()
    assert hub.pipeline.stages[0] is _tap(rt)
    second.close()
    assert hub.pipeline is started_with  # nobody watches: the exact chain the runtime started with


def test_post_publish_send_and_reply_each_become_an_event(rt: ok.Runtime) -> None:
    subscriber = _tap(rt).feed.attach()
    a = rt.hub.bind("a", "alice")
    rt.hub.register_mailbox("agent://a/alice")
    a.post("agent://a/alice", {"n": 1})
    a.publish("orders.created", {"id": 7})
    rt.hub.register_mailbox("agent://a/bob")
    bob = rt.hub.bind("a", "bob")
    answer: list[ok.Message] = []
    asker = threading.Thread(target=lambda: answer.append(a.send("agent://a/bob", {"q": 1}, timeout=10)))
    asker.start()
    request = bob.wait_for(ok.WaitOnMailbox("agent://a/bob"), timeout=10)
    bob.reply(request.correlation_id, {"a": 2})
    asker.join(10)
    assert answer and answer[0].json() == {"a": 2}
    kinds = [e["kind"] for e in _collect(subscriber, 5) if e["kind"] != "receive"]
    assert kinds == ["post", "publish", "send", "reply"]


def test_a_post_event_describes_the_message(rt: ok.Runtime) -> None:
    subscriber = _tap(rt).feed.attach()
    rt.hub.register_mailbox("agent://a/bob")
    sent = rt.hub.bind("a", "alice").post("agent://a/bob", {"hello": "world"}, metadata={"k": "v"})
    (post,) = _collect(subscriber, 1)
    assert post["kind"] == "post"
    assert post["message_id"] == str(sent.id)
    assert (post["crew"], post["agent"], post["to"], post["to_crew"]) == ("a", "alice", "agent://a/bob", "a")
    assert post["topic"] == "_system.post"
    assert post["payload"] == '{"hello":"world"}'
    assert post["at"].endswith("Z") and post["published_at"].endswith("Z")


def test_an_acl_refusal_is_streamed_and_still_reaches_the_caller(rt: ok.Runtime) -> None:
    subscriber = _tap(rt).feed.attach()
    rt.hub.register_mailbox("agent://other/x")
    with pytest.raises(EventAclError):
        rt.hub.bind("locked", "agent").post("agent://other/x", "no")
    (refused,) = _collect(subscriber, 1)
    assert refused["kind"] == "acl_refused"
    assert refused["rule"] == "declared-empty"
    assert refused["operation"] == "post"
    assert "ACL refused" in refused["detail"]


def test_a_received_message_carries_its_latency(rt: ok.Runtime) -> None:
    subscriber = _tap(rt).feed.attach()
    rt.hub.register_mailbox("agent://a/bob")
    rt.hub.bind("a", "alice").post("agent://a/bob", 1)
    rt.hub.bind("a", "bob").wait_for(ok.WaitOnMailbox("agent://a/bob"), timeout=5)
    received = [e for e in _collect(subscriber, 2) if e["kind"] == "receive"]
    assert len(received) == 1
    assert received[0]["operation"] == "wait"
    assert received[0]["latency_ms"] >= 0


def test_a_timed_out_wait_is_streamed_for_the_waiting_crew() -> None:
    clock = ok.VirtualClock()
    with ok.Runtime.start(studio=0, clock=clock) as rt:
        tap = _tap(rt)
        subscriber = tap.feed.attach()
        waiter = rt.hub.bind("w", "agent")
        outcome: list[ok.Message] = []
        thread = threading.Thread(target=lambda: outcome.append(waiter.wait_for(ok.WaitOnTopic("never.*"), timeout=30)))
        thread.start()
        wait_until(lambda: len(tap.waits()) == 1, what="the wait in the Studio's table")
        (info,) = tap.waits()
        assert (info.crew_id, info.agent_id, info.kind, info.target) == ("w", "agent", "on_topic", "never.*")
        assert info.expires_at is not None and (info.expires_at - info.started_at).total_seconds() == pytest.approx(30)
        clock.advance(31)
        thread.join(10)
        (timeout,) = _collect(subscriber, 1)
        assert (timeout["kind"], timeout["crew"], timeout["waited_for"]) == ("timeout", "w", "never.*")
        assert timeout["wait_id"] == info.wait_id
        wait_until(lambda: tap.waits() == [], what="the wait leaving the table")


def test_nothing_is_built_while_no_browser_watches(rt: ok.Runtime) -> None:
    tap = _tap(rt)
    rt.hub.register_mailbox("agent://a/bob")
    for n in range(50):
        rt.hub.bind("a", "alice").post("agent://a/bob", n)
        rt.hub.bind("a", "alice").publish("t.x", n)
    assert tap.feed.emitted == 0
    subscriber = tap.feed.attach()
    rt.hub.bind("a", "alice").publish("t.x", "now")
    assert [e["kind"] for e in _collect(subscriber, 1)] == ["publish"]
    assert tap.feed.emitted == 1


def test_a_runtime_without_studio_has_no_tap() -> None:
    with ok.Runtime.start() as rt:
        assert rt.studio is None
        hub: Any = rt.hub
        assert hub.wait_observer is None and hub.pipeline.stages == ()
