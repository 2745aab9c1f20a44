"""Caller-runs actors: an actor whose turns run on the thread that tells it.

A :class:`PooledActor` hands each turn to a pool thread: one thread hand-off (and GIL
hand-over) per turn. For an actor whose every message is handled in O(1) and never
blocks (a mailbox: queue, waiters, a held reader), that hand-off is most of the cost of
a message. :class:`CallerRunsActor` keeps pykka's actor model and API (``ActorRef``,
``tell``/``ask``, the registry, failure and stop semantics) and changes only who runs a
turn: the thread whose ``tell`` finds the actor idle runs the turn itself, right away,
and keeps handling what other threads put meanwhile until the inbox is empty. A thread
that tells a busy actor only queues the message; the running thread handles it.

Guarantees, the same as :class:`PooledActor`'s: messages are handled one at a time, in
the order they were put (FIFO per sender); an actor is never run by two threads at
once (the inbox's ``scheduled`` flag); ``on_start`` runs (on the starting thread) before
the first message; each actor keeps its own ``contextvars`` context.

The catch, and the rule that comes with it: a turn runs *inside* the caller's ``tell``.
A caller that tells while holding a lock the actor's code also takes would deadlock on
itself. Such callers tell inside :func:`deferred_turns`, entered *before* the lock: the
turns the block owes run when it exits, after the lock is released, still on the same
thread and in the order they were owed. Only actors whose messages never block belong
here: an ``ask`` waits for whichever thread is running the actor, and that thread must
get to it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable

from orkeon_actors.actors.executor import bound_executor
from orkeon_actors.actors.pooled import ActorInbox, PooledActor

__all__ = ["CallerRunsActor", "deferred_turns", "may_wait_here", "never_run_turns_here", "turns_deferred"]

_owed = threading.local()
"""``turns``: the list of turns this thread owes inside a :func:`deferred_turns` block;
``elsewhere``: set by :func:`never_run_turns_here`."""


def never_run_turns_here() -> None:
    """Mark the current thread as one that must never run a caller-runs turn (the store
    writer: a consumer's callbacks, middleware included, must not run on it and delay
    every commit, or wait on it). A ``tell`` from it that finds the actor idle hands the
    turn to the actor's pool instead."""
    _owed.elsewhere = True


def may_wait_here() -> bool:
    """Whether the current thread may block waiting for other threads' work: ``False``
    on a thread marked by :func:`never_run_turns_here` (the store writer, which every
    commit waits for)."""
    return not getattr(_owed, "elsewhere", False)


class _DeferredTurns:
    """The context manager :func:`deferred_turns` returns (a class, not a generator:
    every mailbox call enters one)."""

    __slots__ = ("_turns",)

    def __enter__(self) -> None:
        if getattr(_owed, "turns", None) is not None:
            self._turns: list[Callable[[], None]] | None = None  # the outer block runs them
            return
        self._turns = _owed.turns = []

    def __exit__(self, *_exc: object) -> None:
        turns = self._turns
        if turns is None:
            return
        _owed.turns = None
        # Every owed turn runs, even past one that raised (a turn handles its actor's
        # errors; only an interpreter-level one gets here): an actor whose turn never
        # ran would stay marked running, deaf to every later tell.
        error: BaseException | None = None
        for turn in turns:
            try:
                turn()
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error


def deferred_turns() -> _DeferredTurns:
    """Within the block, a ``tell`` that finds a :class:`CallerRunsActor` idle does not run
    its turn at once: the turn runs when the block exits (also when it raises, since the
    actor counts as running until it does), after whatever the block released. Nested
    blocks run their turns at the exit of the outermost one."""
    return _DeferredTurns()


def turns_deferred() -> bool:
    """Whether this thread is inside a :func:`deferred_turns` block: a turn it owes runs
    only when the block exits, so waiting here for an ``ask`` to an idle caller-runs
    actor would wait forever."""
    return getattr(_owed, "turns", None) is not None


class CallerRunsActor(PooledActor):
    """A pykka actor run by the threads that tell it (module docstring). Subclass it as
    ``pykka.ThreadingActor``; its messages must never block."""

    def _start_actor_loop(self) -> None:
        self._context = contextvars.Context()
        self.executor = executor = bound_executor(self.pool)
        inbox: ActorInbox = self.actor_inbox  # type: ignore[assignment]
        run = self._run_turns

        def run_or_owe() -> None:
            if not executor.lets_callers_run or getattr(_owed, "elsewhere", False):
                executor.submit(self._turn)
                return
            turns: list[Callable[[], None]] | None = getattr(_owed, "turns", None)
            if turns is None:
                run()
            else:
                turns.append(run)

        with inbox.lock:
            inbox.turn = run_or_owe
        self._context.run(self._actor_loop_setup)
        # ``scheduled`` was set until now: what was put before the start runs here.
        run_or_owe()

    def _run_turns(self) -> None:
        """One pass on the caller's thread: up to ``throughput`` messages, those put
        meanwhile included. If more are waiting after it, the rest runs on the actor's
        pool (a caller never works off another thread's backlog without bound);
        otherwise the actor is marked idle, so that the next ``tell`` runs it."""
        inbox: ActorInbox = self.actor_inbox  # type: ignore[assignment]
        more = self._context.run(self._handle_some)
        if more is None:
            return  # stopped: stays "scheduled", nothing runs it again
        with inbox.lock:
            if not more and inbox.go_idle():
                return
        self.executor.submit(self._turn)

    def _fatal(self, exc: BaseException) -> None:
        """An interpreter-level error (``KeyboardInterrupt``, ``SystemExit``) escaped a
        message: it belongs to the caller whose thread ran the turn. Stop this actor and
        raise it there (not ``ThreadingActor``'s stop of every actor, from a thread that
        may itself be running one of them)."""
        self._stop()
        raise exc
