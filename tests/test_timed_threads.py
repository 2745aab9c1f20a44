"""run_together: every thread joined, released at once, the first error raised."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import pytest

from orkeon_actors.timed_threads import run_together


def test_every_body_runs_after_every_preparation_and_all_are_joined() -> None:
    prepared = threading.Semaphore(0)
    log: list[str] = []
    lock = threading.Lock()

    def worker(index: int) -> Callable[[], None]:
        with lock:
            log.append(f"prepared {index}")

        def body() -> None:
            with lock:
                log.append(f"ran {index}")

        prepared.release()
        return body

    timed = run_together([functools.partial(worker, i) for i in range(4)])
    assert sorted(log[:4]) == [f"prepared {i}" for i in range(4)]
    assert sorted(log[4:]) == [f"ran {i}" for i in range(4)]
    assert timed.seconds >= 0


def test_a_failing_body_is_raised_after_the_others_finished() -> None:
    finished = threading.Event()

    def failing() -> Callable[[], None]:
        def body() -> None:
            raise ValueError("boom")

        return body

    def slow() -> Callable[[], None]:
        def body() -> None:
            finished.set()

        return body

    with pytest.raises(ValueError, match="boom"):
        run_together([failing, slow])
    assert finished.is_set()


def test_a_failing_preparation_releases_the_others_and_is_raised() -> None:
    ran = threading.Event()

    def broken() -> Callable[[], None]:
        raise RuntimeError("cannot bind")

    def fine() -> Callable[[], None]:
        return ran.set

    with pytest.raises(RuntimeError, match="cannot bind"):
        run_together([broken, fine, fine])
    assert not ran.is_set()
