"""``IoLoop``: one asyncio event loop on one thread, the one place model and async tool
I/O runs (one per runtime; see ``docs/crews.md``, "The agent loop").

Guarantees:

* the thread starts at the first :meth:`IoLoop.submit` (a runtime whose agents never
  ask an async model never starts it) and :meth:`IoLoop.stop` ends it: every task still
  running is cancelled first (an SDK call aborts its HTTP request), then the loop stops
  and the thread is joined;
* the number of threads does not grow with the number of calls in flight: every
  coroutine runs on the loop's one thread; a *blocking* callable (a user's synchronous
  model that does I/O) runs through :meth:`IoLoop.run_blocking` on a bounded executor of
  at most ``max_blocking_threads`` threads (calls beyond it queue, none is dropped);
* :meth:`IoLoop.submit` after :meth:`IoLoop.stop` raises
  :class:`~orkeon_actors.errors.HubStoppedError`; a call submitted but not yet begun
  when the loop stops is cancelled (its future says so), never left pending;
* submissions are batched: a burst of calls from many crews wakes the loop's thread
  once (one self-pipe write and one thread hand-off), not once per call, and the loop
  starts them in the order they were submitted.

The loop's thread is a daemon thread, so a program that forgets to stop its runtime
still exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from orkeon_actors.errors import HubStoppedError, InvalidArgumentError

__all__ = ["DEFAULT_BLOCKING_THREADS", "IoLoop"]

T = TypeVar("T")

DEFAULT_BLOCKING_THREADS: Final = 8
"""How many threads run blocking (synchronous, I/O-doing) model calls at once by default."""


class IoLoop:
    """An asyncio event loop on its own daemon thread, started lazily.

    ``max_blocking_threads`` bounds the executor :meth:`run_blocking` uses; it may be
    changed until the first blocking call."""

    def __init__(self, name: str = "orkeon-io", *, max_blocking_threads: int = DEFAULT_BLOCKING_THREADS) -> None:
        self.name = name
        self.max_blocking_threads = max_blocking_threads
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._stopped = False
        self._pending: deque[tuple[Callable[[], Coroutine[Any, Any, Any]], concurrent.futures.Future[Any]]] = deque()
        self._wake_due = False  # a _begin_pending is scheduled on the loop

    @property
    def started(self) -> bool:
        """Whether the loop's thread runs (it starts at the first :meth:`submit`)."""
        return self._thread is not None and not self._stopped

    @property
    def thread(self) -> threading.Thread | None:
        """The loop's thread, once started."""
        return self._thread

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started now if it was not)."""
        with self._lock:
            if self._stopped:
                raise HubStoppedError(f"the runtime's I/O loop {self.name!r} is stopped: start a new runtime")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(target=self._run, args=(loop, ready), name=self.name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def submit(self, coroutine: Callable[[], Coroutine[Any, Any, T]]) -> concurrent.futures.Future[T]:
        """Run ``coroutine()`` as a task on the loop; its future (cancelling it cancels
        the task). Raises ``HubStoppedError`` once stopped. Calls submitted before the
        loop's thread got to them start together, in submission order (one wake-up)."""
        loop = self.loop()  # raises once stopped
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            self._pending.append((coroutine, future))
            wake, self._wake_due = not self._wake_due, True
        if wake:
            loop.call_soon_threadsafe(self._begin_pending)
        return future

    def _begin_pending(self) -> None:
        """On the loop: start every submitted call as a task chained to its future."""
        with self._lock:
            batch, self._pending = self._pending, deque()
            self._wake_due = False
            stopped = self._stopped
        loop = asyncio.get_running_loop()
        for coroutine, future in batch:
            if stopped:
                future.cancel()
            else:  # begun even if cancelled meanwhile: cancelled after its first step, as
                # asyncio.run_coroutine_threadsafe does (its finally and except clauses run)
                _chain(loop.create_task(coroutine()), future, loop)

    async def run_blocking(self, fn: Callable[[], T]) -> T:
        """Await ``fn()`` run on the bounded executor (from a coroutine on this loop)."""
        return await asyncio.get_running_loop().run_in_executor(self._blocking_executor(), fn)

    def _blocking_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                bound = self.max_blocking_threads
                if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
                    raise InvalidArgumentError(f"max_blocking_threads must be a positive int, got {bound!r}")
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    bound, thread_name_prefix=f"{self.name}-blocking"
                )
            return self._executor

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel every task still running, stop the loop and join its thread;
        idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            loop, thread, executor = self._loop, self._thread, self._executor
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        if loop is None or thread is None:
            return
        if thread is threading.current_thread():
            loop.call_soon(loop.stop)
            return
        asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        with self._lock:  # submitted as the loop stopped: never begun
            left, self._pending = self._pending, deque()
        for _coroutine, future in left:
            future.cancel()


def _chain(task: asyncio.Task[T], future: concurrent.futures.Future[T], loop: asyncio.AbstractEventLoop) -> None:
    """``future`` takes ``task``'s outcome; cancelling ``future`` cancels ``task``
    (on the loop's thread)."""

    def settle(done: asyncio.Task[T]) -> None:
        # ``future`` stays pending while the task runs (so that cancel() from any thread
        # succeeds and cancels the task, as with ``asyncio.run_coroutine_threadsafe``).
        if done.cancelled():
            future.cancel()
            return
        if not future.set_running_or_notify_cancel():  # cancelled meanwhile
            return
        error = done.exception()
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(done.result())

    def cancelled(settled: concurrent.futures.Future[T]) -> None:
        if settled.cancelled() and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    task.add_done_callback(settle)
    future.add_done_callback(cancelled)


async def _cancel_all() -> None:
    """Cancel every other task of the running loop and let them finish cancelling."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
