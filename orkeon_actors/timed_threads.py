"""Threads released together and timed together: how a figure of concurrent callers is
taken (``orkeon bench`` suites and the fleet host's bench operations).

:func:`run_together` starts one thread per worker. Each worker first prepares (binds its
client, say) and returns the body to time; every thread then waits at one barrier, the
clock starts when all are released and stops when the last body returned. Guarantees:
every thread is joined before it returns, and the first error any worker raised (in
preparation or in its body) is raised again, after all were joined, so a failed figure is
never reported as a fast one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["Timed", "run_together"]

Worker = Callable[[], Callable[[], object]]
"""Prepares, then returns the body whose run is timed."""


class Timed:
    """When the bodies were released and when the last one returned, on ``clock``."""

    __slots__ = ("ended", "started")

    def __init__(self, started: float, ended: float) -> None:
        self.started = started
        self.ended = ended

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def run_together(
    workers: Sequence[Worker], *, clock: Callable[[], float] = time.perf_counter, name: str = "timed"
) -> Timed:
    """Run every worker's body on its own thread, all released at once (see the module
    docstring). Raises the first worker's error once every thread has been joined."""
    barrier = threading.Barrier(len(workers) + 1)
    errors: list[BaseException] = []

    def run(worker: Worker) -> None:
        try:
            body = worker()
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()
            return
        try:
            barrier.wait()
            body()
        except threading.BrokenBarrierError:
            return  # another worker failed its preparation: its error is raised
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,), name=f"{name}-{i}", daemon=True) for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass  # a preparation failed: join, then raise its error below
    started = clock()
    for thread in threads:
        thread.join()
    ended = clock()
    if errors:
        raise errors[0]
    return Timed(started, ended)
