"""Where actor turns run: the executor seam of :class:`PooledActor` and :class:`CallerRunsActor`.

A pooled actor hands each of its turns to a :class:`TurnExecutor`. Normally that is its
class's :class:`~orkeon_actors.actors.pooled.ActorThreadPool`; a deterministic simulation
swaps in a single-threaded, seeded one (:class:`~orkeon_actors.sim.scheduler.DeterministicScheduler`)
without any crew, mailbox or hub code knowing:

* :func:`executor_scope` installs an executor on the current thread for the duration of
  a ``with`` block (scopes nest; the innermost wins);
* an actor started while a scope is active binds to that executor for its whole life
  (every later turn goes there, whichever thread tells it); an actor started outside any
  scope uses its class's ``pool``;
* an ``ask`` made inside a scope gets the executor's future (:meth:`TurnExecutor.create_future`):
  a single-threaded executor's future runs queued turns until it is answered instead of
  blocking the only thread that could answer it;
* a :class:`CallerRunsActor` runs a turn on the telling thread only if its executor
  ``lets_callers_run``; otherwise the turn is submitted like a pooled actor's, so that
  the executor decides its order too.

The scope is thread-local on purpose: a simulation and a normal runtime may live in the
same process (a test suite does), and actors started by another thread are unaffected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

import pykka

__all__ = ["TurnExecutor", "bound_executor", "current_executor", "executor_scope"]


class TurnExecutor(Protocol):
    """Runs actor turns. ``submit`` must not block and must not run ``task`` before it
    returns unless the executor is the only thread running turns (a turn submitted from
    inside a turn runs after it)."""

    lets_callers_run: bool
    """Whether a :class:`CallerRunsActor` bound to this executor may run a turn on the
    thread that tells it (``False``: every turn is submitted)."""

    def submit(self, task: Callable[[], None]) -> None: ...

    def create_future(self) -> pykka.Future[Any]:
        """The future an ``ask`` made under this executor's scope answers through."""
        ...


_scopes = threading.local()


def current_executor() -> TurnExecutor | None:
    """The executor installed on this thread by the innermost :func:`executor_scope`, or
    ``None`` (actors then use their class's pool)."""
    stack: list[TurnExecutor] | None = getattr(_scopes, "stack", None)
    return stack[-1] if stack else None


def bound_executor(default: TurnExecutor) -> TurnExecutor:
    """The executor an actor starting now binds to: the scope's, else ``default`` (its
    class's pool)."""
    executor = current_executor()
    return default if executor is None else executor


class executor_scope:
    """``with executor_scope(executor):`` actors started and asks made on this thread
    within the block go through ``executor`` (module docstring). Reentrant."""

    __slots__ = ("_executor",)

    def __init__(self, executor: TurnExecutor) -> None:
        self._executor = executor

    def __enter__(self) -> TurnExecutor:
        stack: list[TurnExecutor] | None = getattr(_scopes, "stack", None)
        if stack is None:
            stack = _scopes.stack = []
        stack.append(self._executor)
        return self._executor

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack: list[TurnExecutor] = _scopes.stack
        stack.pop()
