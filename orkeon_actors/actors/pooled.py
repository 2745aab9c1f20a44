"""Pooled pykka actors: actors that hold a thread only while they have messages.

``pykka.ThreadingActor`` gives every actor an OS thread for its whole life. Starting one
costs about 0.4 ms here (thread creation, then a GIL hand-over before its ``on_start``),
and a crew is three actors (itself and two mailboxes): that alone caps the rate at which
sleeping crews can be woken far below what the lifecycle needs (issue #8: 5,000 timer
expiries per second, 0.2 ms each). :class:`PooledActor` keeps pykka's actor model and API
and changes only where messages run, the way Akka's dispatchers do:

* each actor has its own inbox; a message put into an idle actor's inbox submits one
  *turn* of that actor to an :class:`ActorThreadPool`;
* a turn handles the actor's messages one at a time, in order, up to ``throughput`` of
  them, then gives the thread back (and resubmits itself when messages remain, so one
  busy actor cannot starve the others);
* an actor is never run by two threads at once: a single ``scheduled`` flag, flipped
  under the inbox lock, owns the right to run it.

Guarantees, identical to ``ThreadingActor``'s:

* messages are handled one at a time, in the order they were put (FIFO per sender);
* ``on_start`` runs before the first message; a message that raises fails the asker's
  future, or, told, logs, calls ``on_failure`` and stops the actor; after a stop, asks
  still in the inbox or put there later fail with ``ActorDeadError`` (a tell racing the
  stop is dropped, and its message freed);
* each actor keeps its own ``contextvars`` context across its turns (as a thread of
  its own would), so a context variable set by one actor never leaks into another
  actor that runs next on the same pool thread.

The pool is *bounded*: a turn goes to an idle thread when there is one, otherwise to a
new thread while fewer than ``max_threads`` run (:data:`DEFAULT_POOL_THREADS`, 16, or
``ORKEON_ACTOR_THREADS``), otherwise it waits in a FIFO queue for the next thread that
finishes a turn; an idle thread ends after ``keep_alive`` seconds, or at :meth:`trim`.
So a burst of 10,000 crew starts runs on 16 threads, not one thread per turn in flight.
A turn that blocks holds its thread; when no turn at all finished for ``blocked_after``
seconds while turns wait (every thread blocked on an ``ask``, on each other, or in a
turn that never ends), a watchdog thread doubles the threads for the queued turns, so
blocked turns cannot deadlock the pool; those extra threads end once nothing is queued.
Pool threads are daemon threads: :meth:`Runtime.stop` stops the actors and trims the
pool; a process that exits without stopping does not wait for idle threads.

What of pykka this relies on. Besides pykka's public API (``Actor``, ``ActorRef``,
``ThreadingFuture``, ``ActorRegistry``), a new actor type implements pykka's hooks "for
implementors of new actor types" (``_create_actor_inbox``, ``_create_future``,
``_start_actor_loop``) and runs pykka's own loop steps by turns instead of in a loop
(``_actor_loop_setup``, ``_handle_receive``, ``_handle_failure``, ``_stop``,
``_actor_loop_teardown``); its ``__init__`` is replaced by one setting the same fields
(``actor_stopped`` a :class:`StopFlag`: a parked crew's actors hold no
``threading.Event``); :data:`PYKKA_HOOKS` names them all. pykka may change them in a
minor release, so ``pyproject.toml`` bounds ``pykka`` below the next minor release, and
``tests/actors/test_actor_contract.py`` runs one suite against ``PooledActor`` and
``pykka.ThreadingActor`` side by side.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import os
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, Final, cast

import pykka
from pykka import ActorRef, ActorRegistry

from orkeon_actors.actors.executor import TurnExecutor, bound_executor, current_executor
from orkeon_actors.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_POOL",
    "DEFAULT_POOL_THREADS",
    "POOL_THREADS_ENV",
    "PYKKA_HOOKS",
    "ActorInbox",
    "ActorThreadPool",
    "PooledActor",
    "StopFlag",
    "default_pool_threads",
]

DEFAULT_POOL_THREADS: Final = 16
"""Threads :data:`DEFAULT_POOL` runs turns on at once, unless ``ORKEON_ACTOR_THREADS`` says
otherwise (``docs/actors.md``, "The pool")."""

POOL_THREADS_ENV: Final = "ORKEON_ACTOR_THREADS"
"""The environment variable that sets :data:`DEFAULT_POOL`'s size at import."""

PYKKA_HOOKS: tuple[str, ...] = (
    "__init__",
    "_create_actor_inbox",
    "_create_future",
    "_start_actor_loop",
    "_actor_loop_setup",
    "_handle_receive",
    "_handle_failure",
    "_stop",
    "_actor_loop_teardown",
)
"""The methods of ``pykka.Actor`` that :class:`PooledActor` implements or calls."""

_pykka_logger = logging.getLogger("pykka")


class _Worker:
    __slots__ = ("task", "thread", "wake")

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()  # released by whoever hands this worker a task
        self.task: Callable[[], None] | None = None
        self.thread: threading.Thread | None = None


def default_pool_threads() -> int:
    """The pool size :data:`DEFAULT_POOL` starts with: ``ORKEON_ACTOR_THREADS`` when set
    (a positive int, else ``InvalidArgumentError``), otherwise :data:`DEFAULT_POOL_THREADS`."""
    raw = os.environ.get(POOL_THREADS_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_POOL_THREADS
    try:
        return _checked_size(int(raw))
    except ValueError:
        raise InvalidArgumentError(
            f"{POOL_THREADS_ENV}={raw!r} is not a positive int: set it to the number of actor pool threads "
            f"(default {DEFAULT_POOL_THREADS}) or unset it"
        ) from None


def _checked_size(size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InvalidArgumentError(f"max_threads must be a positive int (threads of the actor pool), got {size!r}")
    return size


class ActorThreadPool:
    """A bounded pool of daemon threads running actor turns (see the module docstring).

    ``submit(task)`` hands ``task`` to the most recently idle thread (its caches are the
    warmest), or starts a thread for it while fewer than ``max_threads`` run, or queues
    it (FIFO) for the next thread that finishes a turn; it never blocks. A turn that
    blocks while turns wait is compensated after ``blocked_after`` seconds without any
    turn finishing (:meth:`_watch`). ``trim()`` ends the idle threads and waits for them.
    A task must not raise (the actor turns it runs handle every exception of the actor's
    code); one that does is logged and the thread goes on."""

    lets_callers_run = True

    def __init__(
        self,
        *,
        max_threads: int = DEFAULT_POOL_THREADS,
        keep_alive: float = 5.0,
        blocked_after: float = 0.25,
        name: str = "orkeon-actor",
    ) -> None:
        if keep_alive <= 0:
            raise ValueError(f"keep_alive must be > 0 seconds, got {keep_alive}")
        if blocked_after <= 0:
            raise ValueError(f"blocked_after must be > 0 seconds, got {blocked_after}")
        self._max_threads = _checked_size(max_threads)
        self.keep_alive = keep_alive
        self.blocked_after = blocked_after
        self.name = name
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._queue: deque[Callable[[], None]] = deque()
        self._threads = 0
        self._finished = 0  # turns finished: the watchdog's measure of progress
        self._watching = False
        self._numbers = itertools.count(1)

    @property
    def max_threads(self) -> int:
        """Threads that run turns at once (more only while turns block, :meth:`_watch`).
        Settable at any time: a smaller size takes effect as threads finish their turn."""
        return self._max_threads

    @max_threads.setter
    def max_threads(self, size: int) -> None:
        size = _checked_size(size)
        with self._lock:
            self._max_threads = size
            grow = min(len(self._queue), max(0, size - self._threads))
            tasks = [self._queue.popleft() for _ in range(grow)]
            self._threads += grow
        for task in tasks:
            self._start_thread(task)

    @property
    def threads(self) -> int:
        """Threads alive in the pool, busy or idle."""
        with self._lock:
            return self._threads

    @property
    def busy(self) -> int:
        """Threads running a turn now."""
        with self._lock:
            return self._threads - len(self._idle)

    @property
    def queued(self) -> int:
        """Turns waiting for a thread."""
        with self._lock:
            return len(self._queue)

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            if self._idle:  # then nothing is queued: a thread drains the queue before idling
                worker = self._idle.pop()
                worker.task = task
                worker.wake.release()
                return
            if self._threads >= self._max_threads:
                self._queue.append(task)
                if self._watching:
                    return
                self._watching = True
                watch = True
            else:
                self._threads += 1
                watch = False
        if watch:
            self._start_watchdog()
        else:
            self._start_thread(task)

    def _start_thread(self, task: Callable[[], None]) -> None:
        """A new pool thread running ``task`` first (``_threads`` already counts it)."""
        worker = _Worker()
        worker.task = task
        thread = threading.Thread(target=self._run, args=(worker,), name=f"{self.name}-{next(self._numbers)}")
        thread.daemon = True
        worker.thread = thread
        try:
            thread.start()
        except BaseException:
            with self._lock:
                self._threads -= 1
            raise

    def _start_watchdog(self) -> None:
        thread = threading.Thread(target=self._watch, name=f"{self.name}-watchdog", daemon=True)
        try:
            thread.start()
        except BaseException:
            with self._lock:
                self._watching = False
            raise

    def _watch(self) -> None:
        """Runs while turns are queued behind busy threads. Every ``blocked_after``
        seconds in which no turn finished (every thread is held: blocked on an ``ask``,
        a blocking call, each other, or in a turn that does not end), it doubles the
        threads running (at most one per queued turn), giving them the oldest queued
        turns, so turns that wait for a queued turn cannot deadlock the pool; those
        extra threads end as soon as they find nothing queued. A period that took far
        longer than asked (the process was not scheduled) decides nothing."""
        with self._lock:
            seen = self._finished
        while True:
            began = time.monotonic()
            time.sleep(self.blocked_after)
            starved = time.monotonic() - began > 2 * self.blocked_after
            with self._lock:
                if not self._queue:
                    self._watching = False
                    return
                if starved or self._finished != seen:
                    seen = self._finished
                    continue
                # As many more threads as run now (at least one), for the oldest queued
                # turns: a burst of turns that never end (an inline model's agent looping
                # on synchronous tools) gets its threads in a few periods, not one a period.
                grow = min(len(self._queue), max(1, self._threads))
                tasks = [self._queue.popleft() for _ in range(grow)]
                self._threads += grow
            for task in tasks:
                self._start_thread(task)

    def create_future(self) -> pykka.Future[Any]:
        return pykka.ThreadingFuture()

    def trim(self, timeout: float = 5.0) -> None:
        """End every idle thread and wait (up to ``timeout`` seconds each) until they
        have ended. Busy threads finish their turn (and what is queued) and stay."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._threads -= len(idle)
            for worker in idle:
                worker.task = None
                worker.wake.release()
        for worker in idle:
            if worker.thread is not None and worker.thread is not threading.current_thread():
                worker.thread.join(timeout)

    def _run(self, worker: _Worker) -> None:
        task = worker.task
        worker.task = None
        while task is not None:
            try:
                task()
            except BaseException:  # an actor turn handles its own errors: this is a bug
                _pykka_logger.exception("an actor turn raised; the pool thread goes on")
            task = self._next(worker)

    def _next(self, worker: _Worker) -> Callable[[], None] | None:
        """The turn this thread runs next: the oldest queued one, else whatever it is
        handed while idle; ``None``: the thread ends (idle for ``keep_alive`` seconds,
        trimmed, or one more than ``max_threads``)."""
        with self._lock:
            self._finished += 1
            if self._queue:
                return self._queue.popleft()
            if self._threads > self._max_threads:  # a watchdog's extra thread, or the pool shrank
                self._threads -= 1
                return None
            self._idle.append(worker)
        if not worker.wake.acquire(timeout=self.keep_alive):
            with self._lock:
                if worker in self._idle:
                    self._idle.remove(worker)
                    self._threads -= 1
                    return None  # idle for keep_alive seconds
            # A submitter took this worker between the timeout and the lock: its task is
            # set and its release is done or imminent.
            worker.wake.acquire()
        task = worker.task  # None: trimmed
        worker.task = None
        return task


DEFAULT_POOL = ActorThreadPool(max_threads=default_pool_threads())
"""The pool every :class:`PooledActor` runs on unless its class names another."""


class ActorInbox:
    """A pooled actor's inbox (pykka's inbox protocol). ``put`` submits a turn
    when the actor is idle; until the actor's loop starts, messages only queue.

    ``queue`` is ``None`` while nothing is queued (an idle actor holds no deque: an
    empty one keeps its 64-slot block, ≈ 0.6 KB); the turn that finds it empty and
    goes idle drops it, under ``lock``."""

    __slots__ = ("closed", "lock", "queue", "scheduled", "turn")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: deque[Any] | None = None
        self.scheduled = True  # nobody may run the actor before _start_actor_loop
        self.turn: Callable[[], None] | None = None
        self.closed = False
        """Set once the actor's loop tore down: nothing runs a message put after that."""

    def put(self, envelope: Any, /) -> None:
        with self.lock:
            if self.closed:
                queue = None
            else:
                queue = self.queue
                if queue is None:
                    queue = self.queue = deque()
                queue.append(envelope)
                if self.scheduled:
                    return
                self.scheduled = True
                turn = self.turn
        if queue is None:
            # A tell racing the stop (its sender saw the actor alive): dropped, as a
            # message left in a stopped pykka actor's inbox is; an ask fails at once.
            # Kept, it would hold whatever the message refers to (often this actor's
            # own ref, so this inbox) in a cycle only a full collection frees.
            fail_dead([envelope])
            return
        assert turn is not None
        turn()

    def close(self) -> list[Any]:
        """Under ``lock``: refuse every later message and return those queued since the
        teardown drained the inbox (their asks are the caller's to fail)."""
        self.closed = True
        self.turn = None  # a bound method of the actor: no inbox -> actor cycle left
        left, self.queue = self.queue, None
        return list(left or ())

    def get(self) -> Any:
        with self.lock:
            queue = self.queue
            if queue is None:
                raise IndexError("pop from an empty inbox")
            return queue.popleft()

    def empty(self) -> bool:
        with self.lock:
            return not self.queue

    def go_idle(self) -> bool:
        """Under ``lock``: if nothing is queued, mark the actor idle (the next ``put``
        submits a turn), drop the empty queue and return ``True``."""
        if self.queue:
            return False
        self.queue = None
        self.scheduled = False
        return True


def fail_dead(envelopes: list[Any]) -> None:
    """Fail the asks among ``envelopes`` (messages no turn will run) with
    ``ActorDeadError``; tells among them are dropped, as pykka drops them."""
    for envelope in envelopes:
        if envelope.reply_to is not None:
            error = pykka.ActorDeadError("the actor stopped before this message ran")
            envelope.reply_to.set_exception(exc_info=(pykka.ActorDeadError, error, None))


_flag_lock = threading.Lock()
"""Guards :attr:`StopFlag._event`'s creation (rare: only a thread waiting for a stop)."""


class StopFlag:
    """An actor's ``actor_stopped``: ``threading.Event``'s ``is_set`` / ``set`` /
    ``wait`` without an event per actor (its condition, lock and waiter deque are
    ≈ 1 KB): the ``threading.Event`` a waiter blocks on is made by the first ``wait``.
    Once set it stays set (pykka never clears it)."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        with _flag_lock:
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set (or ``timeout`` seconds); whether it is set."""
        if self._set:
            return True
        with _flag_lock:
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        if self._set:  # set before the event existed: it found none to set
            return True
        return event.wait(timeout)


class PooledActor(pykka.Actor):
    """A pykka actor run by turns on an :class:`ActorThreadPool` (module docstring).

    Use it as ``pykka.ThreadingActor``: subclass, override ``on_receive`` / ``on_start``
    / ``on_stop`` / ``on_failure``, ``start()`` returns an ``ActorRef``. Class attributes:
    ``pool`` (default :data:`DEFAULT_POOL`) and ``throughput`` (messages per turn)."""

    pool: ClassVar[ActorThreadPool] = DEFAULT_POOL
    throughput: ClassVar[int] = 64
    start_on_first_message: ClassVar[bool] = False
    """``True``: ``on_start`` runs in the actor's first turn, with its first message,
    instead of a turn of its own submitted at ``start`` (one thread hand-off less for an
    actor that is always told something right after it starts: a waking crew). An actor
    never told anything never runs ``on_start``; ``stop()`` is a message, so a stopped one
    does, then stops."""

    _context: contextvars.Context
    executor: TurnExecutor
    """Where this actor's turns run: the executor of the scope it was started in
    (:mod:`orkeon_actors.actors.executor`), else ``pool``."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        # pykka.Actor.__init__, with a StopFlag for actor_stopped instead of a
        # threading.Event (see StopFlag; ActorRef copies it from the actor).
        self.actor_urn = uuid.uuid4().urn
        self.actor_inbox = self._create_actor_inbox()
        self.actor_stopped = cast(threading.Event, StopFlag())
        self._actor_ref = ActorRef(self)

    @staticmethod
    def _create_actor_inbox() -> ActorInbox:
        return ActorInbox()

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        executor = current_executor()
        return pykka.ThreadingFuture() if executor is None else executor.create_future()

    def _start_actor_loop(self) -> None:
        self._context = contextvars.Context()  # as a new thread's: empty
        pool = self.executor = bound_executor(self.pool)
        inbox: ActorInbox = self.actor_inbox  # type: ignore[assignment]
        if not self.start_on_first_message:
            with inbox.lock:
                inbox.turn = self._submit_turn
            pool.submit(self._first_turn)
            return
        with inbox.lock:
            inbox.turn = self._submit_first_turn
            queued = bool(inbox.queue)
            if not queued:
                inbox.scheduled = False  # the first put submits the first turn
        if queued:
            self._submit_first_turn()

    def _submit_turn(self) -> None:
        self.executor.submit(self._turn)

    def _submit_first_turn(self) -> None:
        # Called once, by the put that found the idle actor (scheduled is set again,
        # so no other put calls a turn before the first one went idle).
        inbox: ActorInbox = self.actor_inbox  # type: ignore[assignment]
        inbox.turn = self._submit_turn
        self.executor.submit(self._first_turn)

    def _first_turn(self) -> None:
        self._context.run(self._actor_loop_setup)
        self._turn()

    def _turn(self) -> None:
        more = self._context.run(self._handle_some)
        # Only now, outside the actor's context (which another thread may enter as soon
        # as a turn is submitted), decide whether to run again or go idle.
        inbox: ActorInbox = self.actor_inbox  # type: ignore[assignment]
        if more is None:  # stopped: stays "scheduled", nothing runs it again
            with inbox.lock:
                left = inbox.close()
            fail_dead(left)
            return
        if not more:
            with inbox.lock:
                if inbox.go_idle():  # the next put submits a turn
                    return
        self.executor.submit(self._turn)  # more to do: behind the other actors' turns

    def _handle_some(self) -> bool | None:
        """Handle up to ``throughput`` messages. ``True``: more are waiting; ``False``:
        the inbox was empty; ``None``: the actor stopped (its inbox torn down)."""
        inbox: ActorInbox = self.actor_inbox  # type: ignore[assignment]
        stopped = self.actor_stopped
        for _ in range(self.throughput):
            if stopped.is_set():
                self._actor_loop_teardown()
                return None
            with inbox.lock:
                queue = inbox.queue
                if not queue:
                    return False
                envelope = queue.popleft()
            self._handle_envelope(envelope)
        if stopped.is_set():
            self._actor_loop_teardown()
            return None
        return True

    def _handle_envelope(self, envelope: Any) -> None:
        """One message, with ``pykka.Actor._actor_loop_running``'s error handling."""
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                _pykka_logger.info(f"Exception returned from {self} to caller:", exc_info=sys.exc_info())
                envelope.reply_to.set_exception()
            else:
                self._handle_failure(*sys.exc_info())
                try:
                    self.on_failure(*sys.exc_info())
                except Exception:
                    self._handle_failure(*sys.exc_info())
        except BaseException as exc:
            self._fatal(exc)

    def _fatal(self, exc: BaseException) -> None:
        """An interpreter-level error (``KeyboardInterrupt``, ``SystemExit``) escaped a
        message: as ``ThreadingActor``, stop this actor and every other one."""
        _pykka_logger.debug(f"{exc!r} in {self}. Stopping all actors.")
        self._stop()
        ActorRegistry.stop_all()
