"""wait_for on topics, mailboxes and replies; timeouts, forever, budgets (§9, §16.1)."""

from __future__ import annotations

from datetime import datetime

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import BudgetExhaustedError, CancelledError, MailboxNotFoundError
from orkeon_actors.testing import wait_until
from tests.conftest import Background


def _wait_registered(hub: ok.EventHub, kind: str, count: int = 1) -> None:
    wait_until(lambda: hub.pending_waits()[kind] == count, what=f"{count} {kind} wait(s)")


def test_topic_wait_returns_the_next_match(hub: ok.EventHub, background: type[Background]) -> None:
    waiter = hub.bind("c", "a")
    job = background(lambda: waiter.wait_for(ok.WaitOnTopic("orders.*"), 10))
    _wait_registered(hub, "on_topic")
    hub.bind("p", "a").publish("other", 0)
    sent = hub.bind("p", "a").publish("orders.created", 1)
    got = job.get()
    assert isinstance(got, ok.Message) and got.id == sent.id
    assert hub.pending_waits()["on_topic"] == 0


def test_topic_wait_with_metadata_match(hub: ok.EventHub, background: type[Background]) -> None:
    job = background(lambda: hub.bind("c", "a").wait_for(ok.WaitOnTopic("t", {"region": "eu"}), 10))
    _wait_registered(hub, "on_topic")
    publisher = hub.bind("p", "a")
    publisher.publish("t", 1, ok.PublishOptions(metadata={"region": "us"}))
    publisher.publish("t", 2, ok.PublishOptions(metadata={"other": "x"}))
    publisher.publish("t", 3, ok.PublishOptions(metadata={"region": "eu", "extra": "y"}))
    got = job.get()
    assert isinstance(got, ok.Message) and got.json() == 3


def test_topic_wait_respects_crew_scope(hub: ok.EventHub, background: type[Background]) -> None:
    job = background(lambda: hub.bind("y", "a").wait_for(ok.WaitOnTopic("t"), 10))
    _wait_registered(hub, "on_topic")
    publisher = hub.bind("p", "a")
    publisher.publish("t", "for x", ok.PublishOptions(target_crew_id="x"))
    publisher.publish("t", "for y", ok.PublishOptions(target_crew_id="y"))
    got = job.get()
    assert isinstance(got, ok.Message) and got.json() == "for y"


def test_mailbox_wait_consumes_the_oldest_queued_message(hub: ok.EventHub) -> None:
    hub.register_mailbox("agent://c/a")
    for i in range(3):
        hub.bind("p", "a").post("agent://c/a", i)
    me = hub.bind("c", "a")
    assert [me.wait_for(ok.WaitOnMailbox("agent://c/a"), 5).json() for _ in range(3)] == [0, 1, 2]


def test_mailbox_wait_on_a_missing_mailbox_is_a_typed_error(hub: ok.EventHub) -> None:
    with pytest.raises(MailboxNotFoundError):
        hub.bind("c", "a").wait_for(ok.WaitOnMailbox("agent://c/none"), 1)


def test_expired_finite_wait_returns_the_wait_timed_out_message(
    virtual_runtime: tuple[ok.Runtime, ok.VirtualClock],
) -> None:
    rt, clock = virtual_runtime
    started = clock.now()
    job = Background(lambda: rt.hub.bind("c", "a").wait_for(ok.WaitOnTopic("never.*"), ok.FiniteWaitTimeout.of(60)))
    _wait_registered(rt.hub, "on_topic")
    clock.advance(59.5)
    assert not job.done
    clock.advance(0.5)
    timed_out = job.get()
    assert isinstance(timed_out, ok.Message)
    assert timed_out.topic == "_system.wait_timed_out" == ok.WAIT_TIMED_OUT_TOPIC
    assert timed_out.source_crew_id == ok.CrewId.SYSTEM and timed_out.source_crew_id.is_system
    assert timed_out.source_agent_id is None
    assert timed_out.payload == b""
    assert set(timed_out.metadata) == {"original_topic", "original_wait_id", "original_started_at"}
    assert timed_out.metadata["original_topic"] == "never.*"
    assert datetime.fromisoformat(timed_out.metadata["original_started_at"]) == started
    assert len(timed_out.metadata["original_wait_id"]) == 26
    assert timed_out.is_timeout
    assert rt.hub.pending_waits()["on_topic"] == 0


def test_mailbox_wait_timeout_keeps_later_messages_for_the_next_consumer(
    virtual_runtime: tuple[ok.Runtime, ok.VirtualClock],
) -> None:
    rt, clock = virtual_runtime
    rt.hub.register_mailbox("agent://c/a")
    me = rt.hub.bind("c", "a")
    job = Background(lambda: me.wait_for(ok.WaitOnMailbox("agent://c/a"), 1))
    _wait_registered(rt.hub, "on_mailbox")
    clock.advance(1)
    timed_out = job.get()
    assert isinstance(timed_out, ok.Message) and timed_out.is_timeout
    assert timed_out.metadata["original_topic"] == "agent://c/a"
    rt.hub.bind("p", "a").post("agent://c/a", "after")
    assert me.wait_for(ok.WaitOnMailbox("agent://c/a"), 5).json() == "after"


def test_forever_wait_blocks_until_cancelled(virtual_runtime: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, clock = virtual_runtime
    token = ok.CancelToken()
    job = Background(lambda: rt.hub.bind("c", "a").wait_for(ok.WaitOnTopic("t"), ok.FOREVER, cancel=token))
    _wait_registered(rt.hub, "on_topic")
    clock.advance(365 * 24 * 3600)
    assert not job.done
    assert rt.scheduler.pending_count() == 0, "a forever wait never enters the scheduler"
    token.cancel()
    with pytest.raises(CancelledError):
        job.get()
    assert rt.hub.pending_waits()["on_topic"] == 0


def test_forever_wait_ends_on_a_match(hub: ok.EventHub, background: type[Background]) -> None:
    job = background(lambda: hub.bind("c", "a").wait_for(ok.WaitOnTopic("t"), ok.FOREVER))
    _wait_registered(hub, "on_topic")
    hub.bind("p", "a").publish("t", "x")
    got = job.get()
    assert isinstance(got, ok.Message) and got.json() == "x"


def test_wait_with_an_exhausted_budget_raises_budget_exhausted(
    virtual_runtime: tuple[ok.Runtime, ok.VirtualClock],
) -> None:
    rt, clock = virtual_runtime
    budget = ok.Budget(max_wall_time=30, clock=clock)
    job = Background(
        lambda: rt.hub.bind("c", "a").wait_for(ok.WaitOnTopic("t"), ok.FiniteWaitTimeout.of(60), cancel=budget.token)
    )
    _wait_registered(rt.hub, "on_topic")
    clock.advance(30)
    with pytest.raises(BudgetExhaustedError, match="wall-time") as info:
        job.get()
    assert not isinstance(info.value, TimeoutError), "budget exhaustion is distinct from a timeout (§9.4)"


def test_budget_exhausted_by_token_usage_cancels_a_forever_wait(hub: ok.EventHub) -> None:
    budget = ok.Budget(max_tokens=10)
    job = Background(lambda: hub.bind("c", "a").wait_for(ok.WaitOnTopic("t"), ok.FOREVER, cancel=budget.token))
    _wait_registered(hub, "on_topic")
    budget.consume(tokens=11)
    with pytest.raises(BudgetExhaustedError, match="token budget"):
        job.get()


def test_a_wait_with_an_already_exhausted_budget_raises_at_once(hub: ok.EventHub) -> None:
    budget = ok.Budget(max_tool_calls=0)
    budget.consume(tool_calls=1)
    with pytest.raises(BudgetExhaustedError):
        hub.bind("c", "a").wait_for(ok.WaitOnTopic("t"), 10, cancel=budget.token)


def test_wait_for_accepts_plain_seconds(virtual_runtime: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, clock = virtual_runtime
    job = Background(lambda: rt.hub.bind("c", "a").wait_for(ok.WaitOnTopic("t"), 2))
    _wait_registered(rt.hub, "on_topic")
    clock.advance(2)
    got = job.get()
    assert isinstance(got, ok.Message) and got.is_timeout


def test_wait_for_rejects_a_bad_descriptor_and_timeout(hub: ok.EventHub) -> None:
    with pytest.raises(ok.errors.InvalidArgumentError, match="WaitOnTopic"):
        hub.bind("c", "a").wait_for("t", 1)  # type: ignore[arg-type]
    with pytest.raises(ok.errors.InvalidArgumentError, match="positive"):
        hub.bind("c", "a").wait_for(ok.WaitOnTopic("t"), 0)


def test_no_lost_wakeup_between_wait_registration_and_publish(hub: ok.EventHub) -> None:
    """Repeat the race many times: a publish right after the wait registered is seen."""
    waiter = hub.bind("c", "a")
    publisher = hub.bind("p", "a")
    for i in range(200):
        job = Background(lambda: waiter.wait_for(ok.WaitOnTopic("race"), 10))
        _wait_registered(hub, "on_topic")
        publisher.publish("race", i)
        got = job.get()
        assert isinstance(got, ok.Message) and got.json() == i
        wait_until(lambda: hub.pending_waits()["on_topic"] == 0, what="the wait to end")
