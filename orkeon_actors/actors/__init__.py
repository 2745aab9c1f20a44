"""The actor runtime under crews and mailboxes: pykka actors that share a pool of threads.

:class:`PooledActor` is a :class:`pykka.Actor` (``ActorRef``, ``tell``/``ask``, proxies,
the ``ActorRegistry``, the same failure and stop semantics as ``pykka.ThreadingActor``)
whose messages run on an :class:`ActorThreadPool` instead of a thread of its own: an actor
holds a thread only while it has messages to handle. See :mod:`.pooled`.
"""

from orkeon_actors.actors.pooled import DEFAULT_POOL, ActorThreadPool, PooledActor

__all__ = ["DEFAULT_POOL", "ActorThreadPool", "PooledActor"]
