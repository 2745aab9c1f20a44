"""The subscribe-by-loop pattern of spec §5.2: an agent that calls ``wait_for_event`` in a
loop sees every matching event published after its first call began, each exactly once
and in order, including the events published while it was busy between two calls."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.tools import EventHubTools
from orkeon_actors.tools.payload import decode_payload
from tests.tools.conftest import Call, wait_registered


def test_an_agent_loop_sees_every_event_exactly_once(rt: ok.Runtime, clock: ok.VirtualClock) -> None:
    """Events arrive (a) while the agent waits, (b) from the agent's own processing step,
    between two calls, and (c) in a burst while the agent is busy, blocked in processing."""
    tools = EventHubTools(rt.hub.bind("billing", "loop"))
    shop = rt.hub.bind("shop", "front")
    processing = threading.Event()
    resume = threading.Event()
    seen: list[int] = []

    def process(payload: int) -> None:
        if payload == 0:  # (b): published by the agent between two waits
            tools.invoke("publish_event", {"topic": "orders.created", "payload": 1})
            tools.invoke("publish_event", {"topic": "orders.cancelled", "payload": 2})
            tools.invoke("publish_event", {"topic": "payments.done", "payload": -1})
        if payload == 2:  # (c): the agent is busy; the test publishes a burst meanwhile
            processing.set()
            assert resume.wait(10)

    def agent_loop() -> dict[str, object]:
        while True:
            result = tools.invoke("wait_for_event", {"topic": "orders.*", "timeout_ms": 600_000})
            if result["timed_out"]:
                return result
            payload = result["message"]["payload"]
            seen.append(payload)
            process(payload)

    agent = Call(agent_loop)
    wait_registered(rt, "on_topic")
    shop.publish("orders.created", 0)  # (a)
    assert processing.wait(10)
    for n in range(3, 50):  # (c)
        shop.publish("orders.eu.created" if n % 10 == 0 else "orders.updated", n)
    resume.set()
    wait_registered(rt, "on_topic")  # the loop drained everything and waits again
    clock.advance(600)
    final = agent.get()
    expected = [0, 1, 2] + [n for n in range(3, 50) if n % 10 != 0]
    assert seen == expected
    assert final["timed_out"] is True and final["metadata"]["original_topic"] == "orders.*"
    tools.close()


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.sampled_from(["orders.created", "orders.paid", "orders.eu.created", "stock.low"]), max_size=8),
        max_size=6,
    )
)
def test_events_published_between_calls_are_never_lost(batches: list[list[str]]) -> None:
    """Property: whatever is published between calls, the loop returns exactly the
    matching events, in publication order, then times out."""
    clock = ok.VirtualClock()
    with ok.Runtime.start(clock=clock) as rt, EventHubTools(rt.hub.bind("billing", "loop")) as tools:
        publisher = rt.hub.bind("shop")

        def wait_once_expecting_timeout() -> None:
            call = Call(lambda: tools.invoke("wait_for_event", {"topic": "orders.*", "timeout_ms": 1000}))
            wait_registered(rt, "on_topic")
            clock.advance(1)
            assert call.get()["timed_out"] is True

        wait_once_expecting_timeout()  # the first call opens the cursor
        expected: list[int] = []
        seen: list[int] = []
        counter = 0
        for batch in batches:
            for topic in batch:
                publisher.publish(topic, counter)
                if topic.count(".") == 1 and topic.startswith("orders."):
                    expected.append(counter)
                counter += 1
            pending = len(expected) - len(seen)
            for _ in range(pending):  # buffered: these calls return at once
                result = tools.invoke("wait_for_event", {"topic": "orders.*", "timeout_ms": 1000})
                seen.append(result["message"]["payload"])
        wait_once_expecting_timeout()
        assert seen == expected


def test_the_first_call_only_sees_events_published_after_it_began(rt: ok.Runtime, clock: ok.VirtualClock) -> None:
    tools = EventHubTools(rt.hub.bind("billing", "late"))
    rt.hub.bind("shop").publish("orders.created", "before")
    call = Call(lambda: tools.invoke("wait_for_event", {"topic": "orders.*", "timeout_ms": 1000}))
    wait_registered(rt, "on_topic")
    clock.advance(1)
    assert call.get()["timed_out"] is True
    rt.hub.bind("shop").publish("orders.created", "after")
    message = tools.wait_for_event({"topic": "orders.*", "timeout_ms": 1000}).message
    assert message is not None and decode_payload(message.payload)[0] == "after"
    tools.close()
