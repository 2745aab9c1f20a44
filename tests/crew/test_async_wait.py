"""The non-blocking wait primitive the crew actors are built on."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import BudgetExhaustedError, CancelledError, MailboxNotFoundError
from orkeon_actors.hub.async_wait import WaitOutcome, push_subscription, wait_async
from orkeon_actors.testing import wait_until


class Outcomes:
    def __init__(self) -> None:
        self.items: list[WaitOutcome] = []
        self.lock = threading.Lock()

    def __call__(self, outcome: WaitOutcome) -> None:
        with self.lock:
            self.items.append(outcome)


@pytest.fixture
def vrt() -> Iterator[tuple[ok.Runtime, ok.VirtualClock]]:
    clock = ok.VirtualClock()
    rt = ok.Runtime.start(clock=clock)
    try:
        yield rt, clock
    finally:
        rt.stop()


def test_mailbox_message_is_delivered_to_the_callback(vrt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, _ = vrt
    rt.hub.register_mailbox("agent://c1/a1")
    c = rt.hub.bind("c1", "a1")
    out = Outcomes()
    wait = wait_async(rt.hub, c.caller, ok.WaitOnMailbox("agent://c1/a1"), ok.FOREVER, None, out)
    wait_until(lambda: rt.hub.pending_waits()["on_mailbox"] == 1)
    rt.hub.bind("c2").post("agent://c1/a1", {"n": 1})
    wait_until(lambda: len(out.items) == 1)
    message = out.items[0]
    assert isinstance(message, ok.Message) and message.json() == {"n": 1}
    assert wait.settled
    assert rt.hub.pending_waits()["on_mailbox"] == 0


def test_topic_wait_and_finite_timeout_on_virtual_clock(vrt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, clock = vrt
    c = rt.hub.bind("c1", "a1")
    got, timed = Outcomes(), Outcomes()
    wait_async(rt.hub, c.caller, ok.WaitOnTopic("orders.*"), ok.FiniteWaitTimeout.of(5), None, got)
    wait_async(rt.hub, c.caller, ok.WaitOnTopic("never.*"), ok.FiniteWaitTimeout.of(5), None, timed)
    rt.hub.bind("c2").publish("orders.created", {"id": 1})
    assert len(got.items) == 1 and isinstance(got.items[0], ok.Message) and got.items[0].topic == "orders.created"
    clock.advance(5)
    assert len(timed.items) == 1
    timeout = timed.items[0]
    assert isinstance(timeout, ok.Message) and timeout.is_timeout
    assert timeout.metadata["original_topic"] == "never.*"
    assert rt.hub.pending_waits() == {"on_topic": 0, "on_mailbox": 0, "on_reply": 0}


def test_cancel_token_and_withdrawal(vrt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, _ = vrt
    c = rt.hub.bind("c1", "a1")
    token = ok.CancelToken()
    cancelled, withdrawn = Outcomes(), Outcomes()
    wait_async(rt.hub, c.caller, ok.WaitOnTopic("x"), ok.FOREVER, token, cancelled)
    handle = wait_async(rt.hub, c.caller, ok.WaitOnTopic("x"), ok.FOREVER, None, withdrawn)
    token.cancel()
    assert len(cancelled.items) == 1 and isinstance(cancelled.items[0], CancelledError)
    assert handle.cancel() is True
    assert handle.cancel() is False
    rt.hub.bind("c2").publish("x", 1)
    assert withdrawn.items == []
    assert rt.hub.pending_waits()["on_topic"] == 0


def test_budget_wall_time_cancels_with_budget_exhausted(vrt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, clock = vrt
    c = rt.hub.bind("c1", "a1")
    budget = ok.Budget(max_wall_time=10, clock=clock)
    out = Outcomes()
    wait_async(rt.hub, c.caller, ok.WaitOnTopic("x"), ok.FOREVER, budget.token, out)
    clock.advance(10)
    assert len(out.items) == 1 and isinstance(out.items[0], BudgetExhaustedError)
    assert not isinstance(out.items[0], TimeoutError)


def test_reply_wait(vrt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, _ = vrt
    reg = rt.hub.register_mailbox("agent://c2/b")
    requester = rt.hub.bind("c1", "a1")
    request = requester.request("agent://c2/b", {"q": 1}, 30)
    assert request.correlation_id is not None
    out = Outcomes()
    wait_async(rt.hub, requester.caller, ok.WaitOnReply(request.correlation_id), ok.FOREVER, None, out)
    with reg.reader() as reader:
        received = reader.receive()
    rt.hub.bind("c2", "b").reply(received.correlation_id or "", {"a": 2})
    assert len(out.items) == 1 and isinstance(out.items[0], ok.Message) and out.items[0].json() == {"a": 2}
    assert not rt.hub.is_active_correlation(request.correlation_id)


def test_unknown_mailbox_raises_at_once(vrt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, _ = vrt
    c = rt.hub.bind("c1", "a1")
    with pytest.raises(MailboxNotFoundError):
        wait_async(rt.hub, c.caller, ok.WaitOnMailbox("agent://c1/none"), ok.FOREVER, None, Outcomes())


def test_push_subscription_sees_every_message_in_order(vrt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, _ = vrt
    seen: list[int] = []
    sub = push_subscription(rt.hub, rt.hub.bind("c1").caller, "tick.#", lambda m: seen.append(m.json()))
    publisher = rt.hub.bind("c2")
    for i in range(5):
        publisher.publish("tick.a", i)
    publisher.publish("tick.b", 9, ok.PublishOptions(target_crew_id="other"))  # scoped away from c1
    sub.close()
    publisher.publish("tick.a", 99)
    assert seen == [0, 1, 2, 3, 4]
