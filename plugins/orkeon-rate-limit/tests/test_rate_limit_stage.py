"""orkeon-rate-limit: the installed plugin, on a virtual clock (deterministic)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from orkeon_rate_limit import Rate, RateLimitMiddleware

import orkeon_actors as ok
from orkeon_actors.errors import InvalidArgumentError, RateLimitedError
from orkeon_actors.middleware import Pipeline

INBOX = "agent://crew-b/inbox"


@pytest.fixture
def clock() -> ok.VirtualClock:
    return ok.VirtualClock()


def _start(clock: ok.VirtualClock, stage: RateLimitMiddleware) -> ok.Runtime:
    return ok.Runtime.start(middleware=[stage], clock=clock)


@pytest.fixture
def rt(clock: ok.VirtualClock) -> Iterator[ok.Runtime]:
    runtime = _start(clock, RateLimitMiddleware(rate=2.0, burst=2))
    try:
        yield runtime
    finally:
        runtime.stop()


def test_the_plugin_is_discovered_through_its_entry_point(clock: ok.VirtualClock) -> None:
    plugin = ok.middleware.discover()["rate_limit"]
    assert (plugin.distribution, plugin.value) == ("orkeon-rate-limit", "orkeon_rate_limit:RateLimitMiddleware")
    stage = ok.middleware.load("rate_limit", rate=1.0, burst=1)
    assert isinstance(stage, RateLimitMiddleware) and stage.default == Rate(1.0, 1)
    with ok.Runtime.start(middleware=["rate_limit"], clock=clock) as runtime:
        client = runtime.hub.bind("crew-a", "w")
        for _ in range(100):  # the default burst
            client.publish("t", 1)
        with pytest.raises(RateLimitedError):
            client.publish("t", 1)


def test_a_burst_passes_then_the_crew_is_told_when_to_retry(rt: ok.Runtime, clock: ok.VirtualClock) -> None:
    client = rt.hub.bind("crew-a", "writer")
    client.publish("t", 1)
    client.publish("t", 2)
    with pytest.raises(RateLimitedError) as refused:
        client.publish("t", 3)
    assert refused.value.retry_after == pytest.approx(0.5)
    assert "crew-a" in str(refused.value) and "retry in 0.500 s" in str(refused.value)
    clock.advance(0.25)
    with pytest.raises(RateLimitedError) as refused:
        client.publish("t", 3)
    assert refused.value.retry_after == pytest.approx(0.25)
    clock.advance(0.25)
    client.publish("t", 3)


def test_a_refused_message_reaches_nobody(rt: ok.Runtime) -> None:
    registration = rt.hub.register_mailbox(INBOX)
    client = rt.hub.bind("crew-a", "writer")
    client.post(INBOX, 1)
    client.post(INBOX, 2)
    with pytest.raises(RateLimitedError):
        client.post(INBOX, 3)
    with pytest.raises(RateLimitedError):
        client.send(INBOX, 4, timeout=10)  # the stage's error, not a timeout
    assert registration.depth() == 2


def test_each_crew_has_its_own_bucket(rt: ok.Runtime) -> None:
    a, b = rt.hub.bind("crew-a", "x"), rt.hub.bind("crew-b", "x")
    a.publish("t", 1)
    a.publish("t", 1)
    with pytest.raises(RateLimitedError):
        a.publish("t", 1)
    b.publish("t", 1)
    b.publish("t", 1)


def test_per_crew_overrides(clock: ok.VirtualClock) -> None:
    stage = RateLimitMiddleware(rate=1.0, burst=1, per_crew={"bulk": (10.0, 5), "slow": Rate(0.5, 1)})
    with _start(clock, stage) as runtime:
        bulk = runtime.hub.bind("bulk", "x")
        for _ in range(5):
            bulk.publish("t", 1)
        with pytest.raises(RateLimitedError) as refused:
            bulk.publish("t", 1)
        assert refused.value.retry_after == pytest.approx(0.1)
        slow = runtime.hub.bind("slow", "x")
        slow.publish("t", 1)
        with pytest.raises(RateLimitedError) as refused:
            slow.publish("t", 1)
        assert refused.value.retry_after == pytest.approx(2.0)
    assert stage.rate_of("bulk") == Rate(10.0, 5) and stage.rate_of("other") == Rate(1.0, 1)


def test_system_traffic_and_replies_are_exempt_by_default(rt: ok.Runtime) -> None:
    for _ in range(10):
        rt.hub.system.publish("audit", 1)
    registration = rt.hub.register_mailbox(INBOX)
    asker, answerer = rt.hub.bind("crew-a", "asker"), rt.hub.bind("crew-b", "inbox")
    answerer.publish("t", 1)
    answerer.publish("t", 1)  # crew-b's bucket is empty now
    request = asker.request(INBOX, 1, timeout=10)
    assert request.correlation_id is not None
    with registration.reader() as reader:
        reader.receive()
    answerer.reply(request.correlation_id, 2)  # replies do not spend tokens


def test_replies_can_be_limited_too(clock: ok.VirtualClock) -> None:
    stage = RateLimitMiddleware(rate=1.0, burst=1, operations={"publish", "post", "send", "reply"})
    with _start(clock, stage) as runtime:
        registration = runtime.hub.register_mailbox(INBOX)
        request = runtime.hub.bind("crew-a", "asker").request(INBOX, 1, timeout=10)
        assert request.correlation_id is not None
        with registration.reader() as reader:
            reader.receive()
        answerer = runtime.hub.bind("crew-b", "inbox")
        answerer.publish("t", 1)
        with pytest.raises(RateLimitedError):
            answerer.reply(request.correlation_id, 2)


def test_the_runtime_clock_is_adopted_and_released(clock: ok.VirtualClock) -> None:
    stage = RateLimitMiddleware(rate=1.0, burst=1)
    with _start(clock, stage) as runtime:
        runtime.hub.bind("crew-a", "x").publish("t", 1)
        assert stage.tokens("crew-a") == 0.0
        clock.advance(0.5)
        assert stage.tokens("crew-a") == 0.5
    assert stage.tokens("crew-a") == 1.0  # detached: buckets measured on the virtual clock are dropped


def test_a_given_clock_is_kept(clock: ok.VirtualClock) -> None:
    own = ok.VirtualClock()
    stage = RateLimitMiddleware(rate=1.0, burst=1, clock=own)
    with _start(clock, stage) as runtime:
        client = runtime.hub.bind("crew-a", "x")
        client.publish("t", 1)
        clock.advance(10)  # the runtime's clock does not refill this stage
        with pytest.raises(RateLimitedError):
            client.publish("t", 1)
        own.advance(1)
        client.publish("t", 1)


def test_full_buckets_are_forgotten_beyond_max_tracked_crews(clock: ok.VirtualClock) -> None:
    stage = RateLimitMiddleware(rate=1.0, burst=1, max_tracked_crews=2)
    with _start(clock, stage) as runtime:
        for n in range(3):
            runtime.hub.bind(f"crew-{n}", "x").publish("t", 1)
        assert len(stage._buckets) == 3  # every bucket is still refilling: nothing to forget
        clock.advance(1)
        runtime.hub.bind("crew-9", "x").publish("t", 1)
        assert set(stage._buckets) == {"crew-9"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate": 0},
        {"rate": -1.0},
        {"rate": float("inf")},
        {"burst": 0},
        {"burst": 1.5},
        {"operations": {"subscribe"}},
        {"max_tracked_crews": 0},
        {"per_crew": {"x": (1.0, 0)}},
    ],
)
def test_invalid_configuration_is_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        RateLimitMiddleware(**kwargs)


def test_receiving_is_never_limited() -> None:
    stage = RateLimitMiddleware(rate=1.0, burst=1, clock=ok.VirtualClock())
    message = ok.Message(ok.MessageId.new(), "t", ok.CrewId("crew-a"), ok.SystemClock().now())
    assert [stage.on_receive(message, lambda m: m) for _ in range(5)] == [message] * 5


@given(
    rate=st.sampled_from([0.5, 1.0, 3.0, 10.0]),
    burst=st.integers(1, 5),
    steps=st.lists(st.tuples(st.sampled_from([0.0, 0.05, 0.1, 0.3, 1.0]), st.integers(1, 4)), max_size=25),
)
def test_never_more_than_burst_plus_rate_times_elapsed(rate: float, burst: int, steps: list[tuple[float, int]]) -> None:
    clock = ok.VirtualClock()
    stage = RateLimitMiddleware(rate=rate, burst=burst, clock=clock)
    publish = Pipeline([stage]).publish_chain("publish", lambda m: m)
    message = ok.Message(ok.MessageId.new(), "t", ok.CrewId("crew-a"), clock.now())
    accepted = 0
    for advance, attempts in steps:
        if advance:
            clock.advance(advance)
        for _ in range(attempts):
            try:
                publish(message)
            except RateLimitedError as refused:
                assert 0 < refused.retry_after <= 1 / rate + 1e-9
                assert stage.tokens("crew-a") < 1.0
            else:
                accepted += 1
        assert accepted <= burst + rate * clock.monotonic() + 1e-6


@given(rate=st.sampled_from([0.5, 2.0, 3.0, 7.0]), burst=st.integers(1, 3))
def test_waiting_retry_after_is_enough(rate: float, burst: int) -> None:
    clock = ok.VirtualClock()
    stage = RateLimitMiddleware(rate=rate, burst=burst, clock=clock)
    publish = Pipeline([stage]).publish_chain("publish", lambda m: m)
    message = ok.Message(ok.MessageId.new(), "t", ok.CrewId("crew-a"), clock.now())
    for _ in range(burst):
        publish(message)
    with pytest.raises(RateLimitedError) as refused:
        publish(message)
    clock.advance(refused.value.retry_after)
    publish(message)
