"""Whether the post being made waits for its recipient's host to confirm delivery
(``HubClient.post(..., confirm_delivery=True)``).

The request travels with the call, not the message: the client sets it around its call
into the hub (:func:`confirming_delivery`), and an adapter whose posts can cross hosts
reads it where it forwards one (:func:`delivery_confirmation_requested`), on the same
thread. A post forwarded later by another thread (a unit of work's outbox) does not see
it. Adapters whose posts are held by their own store when ``post`` returns (the memory
and SQLite hubs) need nothing more: the guarantee already holds there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["confirming_delivery", "delivery_confirmation_requested"]

_REQUESTED: ContextVar[bool] = ContextVar("orkeon_confirm_delivery", default=False)


@contextlib.contextmanager
def confirming_delivery(requested: bool = True) -> Iterator[None]:
    """Within the block, posts made on this thread ask for a delivery confirmation."""
    token = _REQUESTED.set(requested)
    try:
        yield
    finally:
        _REQUESTED.reset(token)


delivery_confirmation_requested: Callable[[], bool] = _REQUESTED.get
"""Whether the post being made on this thread asked for a delivery confirmation (the
context variable's own ``get``: one C call, as the client asks it on every post)."""
