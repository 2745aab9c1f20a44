"""The actor runtime under crews and mailboxes: pykka actors that share a pool of threads.

:class:`PooledActor` is a :class:`pykka.Actor` (``ActorRef``, ``tell``/``ask``, proxies,
the ``ActorRegistry``, the same failure and stop semantics as ``pykka.ThreadingActor``)
whose messages run on an :class:`ActorThreadPool` instead of a thread of its own: an actor
holds a thread only while it has messages to handle. See :mod:`.pooled`.

:class:`CallerRunsActor` is one whose turns run on the thread that tells it when it is
idle (no hand-off at all), for actors whose messages never block; callers holding a lock
tell it inside :func:`deferred_turns`. See :mod:`.caller_runs`.

Both submit their turns to a :class:`TurnExecutor`: their pool, or the executor of the
:func:`executor_scope` they were started in (a simulation's seeded scheduler). See
:mod:`.executor`.
"""

from orkeon_actors.actors.caller_runs import (
    CallerRunsActor,
    deferred_turns,
    may_wait_here,
    never_run_turns_here,
    turns_deferred,
)
from orkeon_actors.actors.executor import TurnExecutor, current_executor, executor_scope
from orkeon_actors.actors.pooled import DEFAULT_POOL, ActorThreadPool, PooledActor

__all__ = [
    "DEFAULT_POOL",
    "ActorThreadPool",
    "CallerRunsActor",
    "PooledActor",
    "TurnExecutor",
    "current_executor",
    "deferred_turns",
    "executor_scope",
    "may_wait_here",
    "never_run_turns_here",
    "turns_deferred",
]
