"""The runtime's asyncio I/O loop (:mod:`orkeon_actors.actors.io_loop`): one thread,
started at first use, stopped (tasks in flight cancelled) by ``Runtime.stop()``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

import orkeon_actors as ok
from orkeon_actors.actors.io_loop import IoLoop
from orkeon_actors.errors import HubStoppedError, InvalidArgumentError


def test_the_runtime_starts_its_loop_at_first_use_and_stop_ends_it() -> None:
    rt = ok.Runtime.start()
    loop = rt.agent_io.loop
    assert not loop.started  # a runtime whose agents never ask an async model has no loop thread

    async def where() -> str:
        return threading.current_thread().name

    assert loop.submit(where).result(5) == "orkeon-io"
    thread = loop.thread
    assert thread is not None and thread.is_alive()
    rt.stop()
    assert not thread.is_alive()
    with pytest.raises(HubStoppedError):
        loop.submit(where)


def test_a_thousand_calls_in_flight_hold_one_thread() -> None:
    loop = IoLoop("test-io")
    release = threading.Event()
    started = 0
    lock = threading.Lock()

    async def call() -> None:
        nonlocal started
        with lock:
            started += 1
        while not release.is_set():
            await asyncio.sleep(0.001)

    before = threading.active_count()
    futures = [loop.submit(call) for _ in range(1000)]
    deadline = threading.Event()
    for _ in range(5000):
        if started == 1000:
            break
        deadline.wait(0.002)
    assert started == 1000  # all in flight at once
    assert threading.active_count() == before + 1
    release.set()
    concurrent.futures.wait(futures, timeout=10)
    loop.stop()


def test_stop_cancels_the_calls_in_flight() -> None:
    loop = IoLoop("test-io")
    began = threading.Event()
    cancelled = threading.Event()

    async def hang() -> None:
        began.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = loop.submit(hang)
    assert began.wait(5)
    loop.stop()
    assert cancelled.is_set()
    assert future.cancelled()


def test_blocking_calls_run_on_a_bounded_executor() -> None:
    loop = IoLoop("test-io", max_blocking_threads=2)
    gate = threading.Barrier(2, timeout=5)
    running: set[str] = set()
    lock = threading.Lock()

    def blocking() -> str:
        with lock:
            running.add(threading.current_thread().name)
        gate.wait()  # two run at once: both reach the barrier
        return threading.current_thread().name

    async def call() -> str:
        return await loop.run_blocking(blocking)

    names = {f.result(10) for f in [loop.submit(call) for _ in range(6)]}
    assert len(names) == 2  # six calls, never more than two threads
    loop.stop()


def test_a_bad_bound_is_a_typed_error() -> None:
    loop = IoLoop("test-io", max_blocking_threads=0)

    async def call() -> None:
        await loop.run_blocking(lambda: None)

    with pytest.raises(InvalidArgumentError, match="max_blocking_threads"):
        loop.submit(call).result(5)
    loop.stop()
