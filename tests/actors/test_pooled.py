"""What is particular to PooledActor: turns on a shared cached pool (the guarantees common
to every actor kind are in test_actor_contract.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from orkeon_actors.actors import ActorThreadPool, PooledActor
from orkeon_actors.testing import wait_until

from .conftest import Recording


@pytest.fixture
def pool() -> Iterator[ActorThreadPool]:
    pool = ActorThreadPool(keep_alive=30.0, name="test-pool")
    yield pool
    pool.trim()


def _actor_class(pool: ActorThreadPool, **body: Any) -> type[PooledActor]:
    return type("TestActor", (PooledActor,), {"pool": pool, **body})


class _Recorder(Recording, PooledActor):
    """Records what it receives; counts how many threads run it at once."""


def _recorder(pool: ActorThreadPool) -> pykka.ActorRef[Any]:
    return type("Recorder", (_Recorder,), {"pool": pool}).start()


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


def test_keep_alive_must_be_positive() -> None:
    with pytest.raises(ValueError, match="keep_alive must be > 0"):
        ActorThreadPool(keep_alive=0)


def test_an_actor_started_on_its_first_message_runs_on_start_in_that_turn(pool: ActorThreadPool) -> None:
    """``start_on_first_message``: no turn at ``start``; ``on_start`` runs, on the pool,
    right before the first message, in the same turn; a stop alone runs it too."""
    seen: list[tuple[str, object]] = []

    class Lazy(PooledActor):
        start_on_first_message = True

        def on_start(self) -> None:
            seen.append(("start", threading.current_thread().name))

        def on_receive(self, message: Any) -> Any:
            seen.append(("message", threading.current_thread().name))
            return message

    Lazy.pool = pool
    ref = Lazy.start()
    assert pool.threads == 0 and seen == []  # nothing ran yet: no turn was submitted
    assert ref.ask("hello") == "hello"
    assert [kind for kind, _ in seen] == ["start", "message"]
    assert seen[0][1] == seen[1][1] != threading.current_thread().name  # one turn, on a pool thread
    ref.stop()

    seen.clear()
    other = Lazy.start()
    other.stop()
    assert [kind for kind, _ in seen] == ["start"]
