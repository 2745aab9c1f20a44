"""``receive_async``: the non-blocking ``Subscription.receive`` a crew parks a
``wait_for_event`` on. Same outcomes as the blocking call, delivered once to a
callback, and nothing lost around timeouts and withdrawals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.async_wait import WaitOutcome, receive_async
from orkeon_actors.model.options import FOREVER, FiniteWaitTimeout


@pytest.fixture
def rt() -> Iterator[tuple[ok.Runtime, ok.VirtualClock]]:
    clock = ok.VirtualClock()
    runtime = ok.Runtime.start(clock=clock)
    try:
        yield runtime, clock
    finally:
        runtime.stop()


def _payloads(outcomes: list[WaitOutcome]) -> list[object]:
    return [o.json() if isinstance(o, ok.Message) else type(o).__name__ for o in outcomes]


def test_a_buffered_message_settles_it_at_once_and_later_ones_stay_buffered(
    rt: tuple[ok.Runtime, ok.VirtualClock],
) -> None:
    runtime, _ = rt
    sub = runtime.hub.bind("c", "a").subscribe("orders")
    pub = runtime.hub.bind("shop")
    pub.publish("orders", 1)
    pub.publish("orders", 2)
    got: list[WaitOutcome] = []
    receive_async(runtime.hub, sub, FOREVER, None, got.append)
    assert _payloads(got) == [1]
    assert sub.poll() is not None and sub.poll() is None  # 2 stayed, once


def test_a_parked_receive_takes_the_next_message_and_only_that_one(rt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    runtime, _ = rt
    sub = runtime.hub.bind("c", "a").subscribe("orders")
    got: list[WaitOutcome] = []
    receive_async(runtime.hub, sub, FiniteWaitTimeout(10), None, got.append)
    assert got == [] and runtime.hub.pending_waits()["on_topic"] == 1
    pub = runtime.hub.bind("shop")
    pub.publish("orders", 1)
    pub.publish("orders", 2)
    assert _payloads(got) == [1]
    assert runtime.hub.pending_waits()["on_topic"] == 0
    assert [m.json() for m in sub.pending()] == [2]


def test_a_timeout_is_the_hub_timeout_message_and_the_subscription_keeps_what_follows(
    rt: tuple[ok.Runtime, ok.VirtualClock],
) -> None:
    runtime, clock = rt
    sub = runtime.hub.bind("c", "a").subscribe("orders.*")
    got: list[WaitOutcome] = []
    receive_async(runtime.hub, sub, FiniteWaitTimeout(5), None, got.append)
    clock.advance(5)
    [timeout] = got
    assert isinstance(timeout, ok.Message) and timeout.is_timeout
    assert timeout.metadata["original_topic"] == "orders.*"
    runtime.hub.bind("shop").publish("orders.new", 3)
    assert len(got) == 1 and [m.json() for m in sub.pending()] == [3]


def test_a_withdrawn_receive_leaves_the_next_message_buffered(rt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    runtime, _ = rt
    sub = runtime.hub.bind("c", "a").subscribe("orders")
    got: list[WaitOutcome] = []
    wait = receive_async(runtime.hub, sub, FOREVER, None, got.append)
    assert wait.cancel() is True
    runtime.hub.bind("shop").publish("orders", 4)
    assert got == [] and [m.json() for m in sub.pending()] == [4]


def test_closing_the_subscription_ends_the_receive_with_a_typed_error(rt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    runtime, _ = rt
    sub = runtime.hub.bind("c", "a").subscribe("orders")
    got: list[WaitOutcome] = []
    receive_async(runtime.hub, sub, FOREVER, None, got.append)
    sub.close()
    [error] = got
    assert isinstance(error, InvalidArgumentError) and "closed" in str(error)


def test_a_cancel_token_ends_it_with_the_token_error(rt: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    runtime, _ = rt
    sub = runtime.hub.bind("c", "a").subscribe("orders")
    token = ok.CancelToken()
    got: list[WaitOutcome] = []
    receive_async(runtime.hub, sub, FOREVER, token, got.append)
    token.cancel()
    assert _payloads(got) == ["CancelledError"]
    runtime.hub.bind("shop").publish("orders", 5)
    assert [m.json() for m in sub.pending()] == [5]


def test_a_wait_settled_while_it_registers_is_delivered_once_and_leaves_nothing_behind() -> None:
    """A caller-runs mailbox settles a mailbox wait inside its registration (a message
    was already queued, the turn runs on the registering thread): the outcome still
    arrives, once, and no timer or waiter remains."""
    from orkeon_actors.hub.async_wait import wait_async
    from orkeon_actors.model.options import WaitOnMailbox

    runtime = ok.Runtime.start(clock=ok.VirtualClock())
    try:
        reg = runtime.hub.register_mailbox("agent://c/a")
        runtime.hub.bind("shop").post(reg.address, 7)
        got: list[WaitOutcome] = []
        caller = runtime.hub.bind("c", "a").caller
        wait_async(runtime.hub, caller, WaitOnMailbox(reg.address), FiniteWaitTimeout(5), None, got.append)
        assert _payloads(got) == [7]
        assert runtime.hub.pending_waits()["on_mailbox"] == 0 and runtime.scheduler.pending_count() == 0
        assert reg.depth() == 0
    finally:
        runtime.stop()
