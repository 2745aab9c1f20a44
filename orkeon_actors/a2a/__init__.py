"""The Agent2Agent protocol (A2A, v1.0) in both directions, with the official ``a2a-sdk``
(the ``a2a`` extra: ``pip install "orkeon-actors[a2a]"``).

* :mod:`orkeon_actors.a2a.server`: crews served as A2A agents (``orkeon a2a``,
  ``Runtime.start(a2a=PORT)``; ``docs/a2a.md``).
* :mod:`orkeon_actors.a2a.client`: remote A2A agents reached from a crew
  (``docs/a2a-calling.md``).

Nothing is imported here, so that ``import orkeon_actors.a2a`` works without the extra;
import the subpackage you use.
"""

__all__ = ["EXTRA_MODULES"]

EXTRA_MODULES = frozenset({"a2a", "uvicorn", "starlette", "sse_starlette", "httpx", "google", "h11"})
"""The top-level modules the ``a2a`` extra brings: a ``ModuleNotFoundError`` naming one
of them means the extra is missing (and is reported so)."""
