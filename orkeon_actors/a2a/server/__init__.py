"""Crews served as A2A agents (needs the ``a2a`` extra: ``pip install "orkeon-actors[a2a]"``).

:class:`A2AServer` serves every crew exposed on it (a crew document's ``a2a:`` block)
with the official ``a2a-sdk``; ``orkeon a2a`` and ``Runtime.start(a2a=PORT)`` start one.
Each task is a crew run; see ``docs/a2a.md``.
"""

from orkeon_actors.a2a.server.server import DEFAULT_CALLER, A2AConfig, A2AServer

__all__ = ["DEFAULT_CALLER", "A2AConfig", "A2AServer"]
