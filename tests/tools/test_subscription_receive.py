"""The hub additions the tools build on: ``Subscription.receive(timeout, cancel=)``,
``subscribe(metadata_match=, max_buffered=)``, ``Subscription.dropped``, and the parked
waiter of ``LocalBuffer``."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import CancelledError, HubStoppedError, InvalidArgumentError
from orkeon_actors.hub.waiter import BufferClosed, LocalBuffer, Waiter
from tests.tools.conftest import Call, wait_registered


def test_receive_returns_a_buffered_message_at_once(rt: ok.Runtime) -> None:
    sub = rt.hub.bind("c", "a").subscribe("orders.*")
    sent = rt.hub.bind("p").publish("orders.created", 1)
    assert sub.receive(ok.FOREVER).id == sent.id
    assert rt.hub.pending_waits()["on_topic"] == 0


def test_receive_blocks_as_a_registered_topic_wait(rt: ok.Runtime) -> None:
    sub = rt.hub.bind("c", "a").subscribe("orders.*")
    call = Call(lambda: sub.receive(60))
    wait_registered(rt, "on_topic")
    sent = rt.hub.bind("p").publish("orders.created", 2)
    assert call.get().id == sent.id
    assert rt.hub.pending_waits()["on_topic"] == 0


def test_timeout_returns_the_wait_timed_out_message_and_keeps_the_subscription(
    rt: ok.Runtime, clock: ok.VirtualClock
) -> None:
    sub = rt.hub.bind("c", "a").subscribe("orders.#")
    call = Call(lambda: sub.receive(5))
    wait_registered(rt, "on_topic")
    clock.advance(5)
    timed_out = call.get()
    assert timed_out.is_timeout
    assert timed_out.topic == ok.WAIT_TIMED_OUT_TOPIC
    assert timed_out.metadata["original_topic"] == "orders.#"
    assert timed_out.target_crew_id == "c"
    # Published right after the timeout: kept for the next receive, once.
    sent = rt.hub.bind("p").publish("orders.created", 3)
    assert sub.receive(5).id == sent.id
    assert sub.drain() == []


def test_a_message_refused_by_a_timed_out_waiter_is_kept() -> None:
    buffer: LocalBuffer[int] = LocalBuffer()
    waiter: Waiter[int] = Waiter()
    assert buffer.take_or_park(waiter) is None
    assert waiter.try_complete(-1)  # the timeout won the race
    assert buffer.push(7)  # offered to the settled waiter, refused, queued
    buffer.unpark(waiter)
    assert buffer.take_nowait() == 7


def test_a_parked_waiter_gets_the_next_push_and_nothing_is_queued() -> None:
    buffer: LocalBuffer[int] = LocalBuffer()
    waiter: Waiter[int] = Waiter()
    assert buffer.take_or_park(waiter) is None
    assert buffer.push_many([1, 2])
    assert waiter.wait() == 1
    buffer.unpark(waiter)
    assert buffer.take_nowait() == 2
    assert buffer.take_nowait() is None


def test_closing_a_buffer_fails_its_parked_waiter() -> None:
    buffer: LocalBuffer[int] = LocalBuffer()
    waiter: Waiter[int] = Waiter()
    buffer.take_or_park(waiter)
    buffer.close()
    with pytest.raises(BufferClosed):
        waiter.wait()
    with pytest.raises(BufferClosed):
        buffer.take_or_park(Waiter())


def test_a_bounded_buffer_drops_the_oldest() -> None:
    buffer: LocalBuffer[int] = LocalBuffer(maxlen=2)
    for n in range(5):
        buffer.push(n)
    assert (buffer.dropped, buffer.take_nowait(), buffer.take_nowait()) == (3, 3, 4)
    with pytest.raises(ValueError):
        LocalBuffer(maxlen=0)


def test_cancel_interrupts_receive(rt: ok.Runtime) -> None:
    sub = rt.hub.bind("c", "a").subscribe("t")
    token = ok.CancelToken()
    call = Call(lambda: sub.receive(ok.FOREVER, cancel=token))
    wait_registered(rt, "on_topic")
    token.cancel()
    with pytest.raises(CancelledError):
        call.get()
    sent = rt.hub.bind("p").publish("t", 1)
    assert sub.receive(1).id == sent.id  # still open, nothing lost


def test_close_and_stop_end_a_blocked_receive(clock: ok.VirtualClock) -> None:
    with ok.Runtime.start(clock=clock) as rt:
        sub = rt.hub.bind("c", "a").subscribe("t")
        call = Call(lambda: sub.receive(ok.FOREVER))
        wait_registered(rt, "on_topic")
        sub.close()
        with pytest.raises(InvalidArgumentError, match="closed"):
            call.get()
        with pytest.raises(InvalidArgumentError):
            sub.receive(1)
        other = rt.hub.bind("c", "a").subscribe("t")
        call = Call(lambda: other.receive(ok.FOREVER))
        wait_registered(rt, "on_topic")
        rt.stop()
        with pytest.raises(HubStoppedError):
            call.get()


def test_subscribe_with_metadata_match(rt: ok.Runtime) -> None:
    sub = rt.hub.bind("c", "a").subscribe("t", metadata_match={"region": "eu"})
    publisher = rt.hub.bind("p")
    publisher.publish("t", 1, ok.PublishOptions(metadata={"region": "us"}))
    publisher.publish("t", 2, ok.PublishOptions(metadata={"region": "eu", "x": "y"}))
    assert [m.json() for m in sub.drain()] == [2]


def test_subscribe_with_max_buffered(rt: ok.Runtime) -> None:
    sub = rt.hub.bind("c", "a").subscribe("t", max_buffered=2)
    publisher = rt.hub.bind("p")
    for n in range(5):
        publisher.publish("t", n)
    assert sub.dropped == 3
    assert [m.json() for m in sub.drain()] == [3, 4]
    assert rt.hub.bind("c").subscribe("t").dropped == 0


@pytest.mark.parametrize("bound", [0, -1, True, 1.5])
def test_subscribe_refuses_a_bad_bound(rt: ok.Runtime, bound: object) -> None:
    with pytest.raises(InvalidArgumentError):
        rt.hub.bind("c").subscribe("t", max_buffered=bound)  # type: ignore[arg-type]
