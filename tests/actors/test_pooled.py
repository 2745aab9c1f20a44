"""PooledActor keeps pykka's actor guarantees while sharing threads (orkeon_actors.actors)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.actors import ActorThreadPool, PooledActor
from orkeon_actors.testing import wait_until

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("test_pooled_var", default="unset")


@pytest.fixture
def pool() -> Iterator[ActorThreadPool]:
    pool = ActorThreadPool(keep_alive=30.0, name="test-pool")
    yield pool
    pool.trim()


def _actor_class(pool: ActorThreadPool, **body: Any) -> type[PooledActor]:
    return type("TestActor", (PooledActor,), {"pool": pool, **body})


class _Recorder(PooledActor):
    """Records what it receives; counts how many threads run it at once."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self.started = False
        self.running = 0
        self.max_running = 0
        self.lock = threading.Lock()

    def on_start(self) -> None:
        self.started = True

    def on_receive(self, message: Any) -> Any:
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            if message == "started?":
                return self.started
            if message == "seen":
                return list(self.seen)
            if message == "max_running":
                return self.max_running
            self.seen.append(message)
            return None
        finally:
            with self.lock:
                self.running -= 1


def _recorder(pool: ActorThreadPool) -> pykka.ActorRef[Any]:
    return type("Recorder", (_Recorder,), {"pool": pool}).start()


def test_on_start_runs_before_the_first_message(pool: ActorThreadPool) -> None:
    ref = _recorder(pool)
    try:
        assert ref.ask("started?", timeout=10) is True
    finally:
        ref.stop()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=4))
def test_each_senders_messages_arrive_in_order_none_lost_none_twice(counts: list[int]) -> None:
    pool = ActorThreadPool(keep_alive=30.0)
    ref = _recorder(pool)
    try:
        def send(sender: int, count: int) -> None:
            for i in range(count):
                ref.tell((sender, i))

        threads = [threading.Thread(target=send, args=(s, c)) for s, c in enumerate(counts)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seen = ref.ask("seen", timeout=10)
        assert sorted(seen) == sorted((s, i) for s, c in enumerate(counts) for i in range(c))
        for sender, count in enumerate(counts):
            assert [i for s, i in seen if s == sender] == list(range(count))
        # more messages than one turn handles: the actor was resubmitted, never run twice at once
        assert ref.ask("max_running", timeout=10) == 1
    finally:
        ref.stop()
        pool.trim()


def test_an_ask_that_raises_fails_the_askers_future_and_the_actor_goes_on(pool: ActorThreadPool) -> None:
    def on_receive(self: PooledActor, message: Any) -> Any:
        if message == "boom":
            raise ValueError("boom")
        return message

    ref = _actor_class(pool, on_receive=on_receive).start()
    try:
        with pytest.raises(ValueError, match="boom"):
            ref.ask("boom", timeout=10)
        assert ref.ask("still here", timeout=10) == "still here"
    finally:
        ref.stop()


def test_a_told_message_that_raises_calls_on_failure_stops_the_actor_and_fails_queued_asks(
    pool: ActorThreadPool,
) -> None:
    failed = threading.Event()
    release = threading.Event()

    def on_receive(self: PooledActor, message: Any) -> Any:
        if message == "hold":
            release.wait(10)
            return None
        if message == "boom":
            raise RuntimeError("boom")
        return message

    def on_failure(self: PooledActor, *exc_info: Any) -> None:
        failed.set()

    ref = _actor_class(pool, on_receive=on_receive, on_failure=on_failure).start()
    ref.tell("hold")
    ref.tell("boom")
    queued = ref.ask("after", block=False)
    release.set()
    assert failed.wait(10)
    wait_until(lambda: not ref.is_alive(), what="the failed actor to stop")
    with pytest.raises(pykka.ActorDeadError):
        queued.get(timeout=10)


def test_each_actor_keeps_its_own_context_variables_across_turns(pool: ActorThreadPool) -> None:
    def on_receive(self: PooledActor, message: Any) -> Any:
        if message == "get":
            return _VAR.get()
        _VAR.set(message)
        return None

    cls = _actor_class(pool, on_receive=on_receive)
    first, second = cls.start(), cls.start()
    try:
        first.ask("first's value", timeout=10)
        for _ in range(20):  # many turns, on whichever pool thread is free
            assert first.ask("get", timeout=10) == "first's value"
            assert second.ask("get", timeout=10) == "unset"
        assert _VAR.get() == "unset"
    finally:
        first.stop()
        second.stop()


def test_an_actor_that_blocks_does_not_block_the_others(pool: ActorThreadPool) -> None:
    release = threading.Event()

    def on_receive(self: PooledActor, message: Any) -> Any:
        if message == "block":
            release.wait(30)
        return message

    cls = _actor_class(pool, on_receive=on_receive)
    blocked, other = cls.start(), cls.start()
    try:
        blocked.tell("block")
        assert other.ask("answers", timeout=10) == "answers"
    finally:
        release.set()
        blocked.stop()
        other.stop()


def test_idle_actors_hold_no_thread_and_trim_ends_the_idle_threads(pool: ActorThreadPool) -> None:
    refs = [_recorder(pool) for _ in range(50)]
    try:
        for ref in refs:
            assert ref.ask("started?", timeout=10) is True
        wait_until(lambda: pool.busy == 0, what="every pool thread to be idle")
        assert 1 <= pool.threads <= 50
    finally:
        for ref in refs:
            ref.stop()
    pool.trim()
    assert pool.threads == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("test-pool-")]


def test_an_idle_thread_ends_after_keep_alive() -> None:
    pool = ActorThreadPool(keep_alive=0.05, name="short-pool")
    ref = _recorder(pool)
    ref.stop()
    wait_until(lambda: pool.threads == 0, what="the idle thread to end")
    assert not [t for t in threading.enumerate() if t.name.startswith("short-pool-")]


def test_stopping_answers_the_stop_and_refuses_later_messages(pool: ActorThreadPool) -> None:
    ref = _recorder(pool)
    ref.tell("before")
    assert ref.ask("seen", timeout=10) == ["before"]
    ref.stop(block=True, timeout=10)
    assert not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("after")


def test_keep_alive_must_be_positive() -> None:
    with pytest.raises(ValueError, match="keep_alive must be > 0"):
        ActorThreadPool(keep_alive=0)
