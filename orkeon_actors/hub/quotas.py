"""What one caller may hold at once: blocked waits and open subscriptions.

Each hub has one :class:`CallerQuotas`. A caller is a ``(crew, agent)`` pair, so one
agent running out of its quota leaves every other agent (of its crew too) unaffected.
Pending requests are counted where they live (:class:`~orkeon_actors.hub.replies.PendingReplies`).
Overflows raise ``LimitExceededError`` naming the bound of
:class:`~orkeon_actors.model.limits.Limits`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from orkeon_actors.errors import LimitExceededError
from orkeon_actors.hub.port import CallerContext

__all__ = ["CallerQuotas"]

_ADVICE = {
    "max_waits": "finish or cancel a wait first",
    "max_subscriptions": "close a subscription first",
    "max_pending_requests": "wait for a reply (or its timeout) first",
}


def quota_exceeded(bound: str, limit: int, caller: CallerContext) -> LimitExceededError:
    """The error for ``caller`` holding ``limit`` of what ``bound`` counts already."""
    who = f"agent {caller.agent_id} of crew {caller.crew_id}" if caller.agent_id else f"crew {caller.crew_id}"
    return LimitExceededError(
        f"{who} already holds {limit} ({bound}): {_ADVICE.get(bound, 'release one first')}",
        bound=bound,
        limit=limit,
    )


class CallerQuotas:
    """Counters per ``(bound, caller)``. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Counter[tuple[str, CallerContext]] = Counter()

    def acquire(self, bound: str, limit: int, caller: CallerContext) -> Callable[[], None]:
        """Count one more of ``bound`` for ``caller``; the returned function gives it
        back (idempotent). Raises ``LimitExceededError`` if ``caller`` holds ``limit``
        already. The system is not counted."""
        if caller.is_system:
            return _nothing
        key = (bound, caller)
        with self._lock:
            if self._held[key] >= limit:
                raise quota_exceeded(bound, limit, caller)
            self._held[key] += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._held[key] -= 1
                if self._held[key] <= 0:
                    del self._held[key]

        return release

    def held(self, bound: str, caller: CallerContext) -> int:
        """How many of ``bound`` ``caller`` holds now."""
        return self._held.get((bound, caller), 0)


def _nothing() -> None:
    return None
