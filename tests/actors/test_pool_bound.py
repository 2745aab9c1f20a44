"""The actor pool is bounded: a burst of turns queues behind ``max_threads`` threads
instead of starting a thread per turn, and turns that block waiting for one another
still all run (docs/actors.md, "The pool")."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from orkeon_actors.actors import ActorThreadPool, PooledActor
from orkeon_actors.actors.pooled import DEFAULT_POOL_THREADS, POOL_THREADS_ENV, default_pool_threads
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.testing import wait_until


@pytest.fixture
def pool() -> Iterator[ActorThreadPool]:
    pool = ActorThreadPool(max_threads=3, keep_alive=30.0, blocked_after=0.05, name="bound-pool")
    yield pool
    pool.trim()


def _actor_class(pool: ActorThreadPool, **body: Any) -> type[PooledActor]:
    return type("BoundActor", (PooledActor,), {"pool": pool, **body})


def test_a_burst_of_turns_never_runs_on_more_than_max_threads(pool: ActorThreadPool) -> None:
    seen: list[int] = []  # the pool's threads, as each turn saw them

    def on_receive(self: PooledActor, message: Any) -> Any:
        seen.append(pool.threads)
        return message

    refs = [_actor_class(pool, on_receive=on_receive).start() for _ in range(300)]
    try:
        futures = [ref.ask(i, block=False) for i, ref in enumerate(refs)]
        assert [future.get(timeout=30) for future in futures] == list(range(300))
    finally:
        for ref in refs:
            ref.stop()
    assert len(seen) == 300
    assert max(seen) <= pool.max_threads
    assert pool.queued == 0


def test_turns_that_wait_for_each_other_beyond_max_threads_all_run(pool: ActorThreadPool) -> None:
    # Five turns that each wait until all five run at once: three threads cannot hold
    # them, so the pool must add threads for turns blocked behind blocked ones.
    barrier = threading.Barrier(5, timeout=30)

    def on_receive(self: PooledActor, message: Any) -> Any:
        return barrier.wait()

    refs = [_actor_class(pool, on_receive=on_receive).start() for _ in range(5)]
    try:
        futures = [ref.ask("meet", block=False) for ref in refs]
        assert sorted(future.get(timeout=30) for future in futures) == list(range(5))
    finally:
        for ref in refs:
            ref.stop()
    # The threads added for the blocked turns end once nothing is queued.
    wait_until(lambda: pool.threads <= pool.max_threads, what="the extra threads to end")


def test_an_ask_between_actors_beyond_max_threads_does_not_deadlock(pool: ActorThreadPool) -> None:
    # Every thread runs an actor that asks another one whose turn is queued behind it.
    answerer = _actor_class(pool, on_receive=lambda self, message: message * 2)

    def ask_on(self: PooledActor, message: Any) -> Any:
        target: pykka.ActorRef[Any] = message
        return target.ask(21, timeout=30)

    askers = [_actor_class(pool, on_receive=ask_on).start() for _ in range(6)]
    targets = [answerer.start() for _ in range(6)]
    try:
        futures = [asker.ask(target, block=False) for asker, target in zip(askers, targets, strict=True)]
        assert [future.get(timeout=30) for future in futures] == [42] * 6
    finally:
        for ref in (*askers, *targets):
            ref.stop()


def test_max_threads_can_be_raised_while_turns_are_queued(pool: ActorThreadPool) -> None:
    release = threading.Event()
    running = threading.Semaphore(0)

    def on_receive(self: PooledActor, message: Any) -> Any:
        running.release()
        release.wait(30)
        return message

    refs = [_actor_class(pool, on_receive=on_receive).start() for _ in range(5)]
    try:
        futures = [ref.ask(i, block=False) for i, ref in enumerate(refs)]
        pool.max_threads = 5
        for _ in range(5):  # all five run at once: the two queued turns got threads
            assert running.acquire(timeout=30)
        release.set()
        assert [future.get(timeout=30) for future in futures] == list(range(5))
    finally:
        release.set()
        for ref in refs:
            ref.stop()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_max_threads_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="max_threads must be a positive int"):
        ActorThreadPool(max_threads=bad)


def test_the_default_pool_size_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(POOL_THREADS_ENV, raising=False)
    assert default_pool_threads() == DEFAULT_POOL_THREADS
    monkeypatch.setenv(POOL_THREADS_ENV, "6")
    assert default_pool_threads() == 6
    monkeypatch.setenv(POOL_THREADS_ENV, "many")
    with pytest.raises(InvalidArgumentError, match="ORKEON_ACTOR_THREADS='many' is not a positive int"):
        default_pool_threads()
    monkeypatch.setenv(POOL_THREADS_ENV, "0")
    with pytest.raises(InvalidArgumentError, match="not a positive int"):
        default_pool_threads()
