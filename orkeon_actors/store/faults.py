"""Named fault points in the durable store, for crash tests.

The store calls :func:`hit` at the moments a crash matters (between a transaction's
statements and its commit, after a commit before anything acts on it, mid-dispatch of
the outbox). With nothing installed a hit costs one global read. A crash test installs
:func:`kill_at`, which SIGKILLs the process itself at the n-th hit of a point: a real,
unclean death of a real process, at an exact place.

Points:

``writer.before_commit``
    every statement of a group-commit batch ran; ``COMMIT`` has not.
``writer.after_commit``
    the batch committed; no caller was acknowledged and no after-commit action ran.
``outbox.before_dispatch``
    outbox rows committed by a unit of work reached the dispatcher, which has not acted.
``outbox.mid_dispatch``
    inside a dispatch transaction, after its first row was handed to a mailbox.
``outbox.after_route``
    a published outbox message was routed to live subscribers, not yet marked dispatched.
``send.intent_reserved`` ... ``send.intent_cleaned``
    the steps of one send of an agent's sent history (:data:`SEND_POINTS`, in order; see
    :mod:`orkeon_actors.store.sent_history`).

A child process can arm one of them without code: with ``ORKEON_TEST_HOOKS=1`` set,
``ORKEON_TEST_SEND_FAIL_AFTER=<point>`` (a send point, without the ``send.`` prefix, or
any point above) and optionally ``ORKEON_TEST_SEND_FAIL_NTH=<n>`` make
:func:`arm_from_environment` (called when a store opens) SIGKILL the process there.
Without ``ORKEON_TEST_HOOKS=1`` the variables are never read.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

__all__ = ["POINTS", "SEND_POINTS", "arm_from_environment", "hit", "install", "uninstall", "kill_at"]

SEND_POINTS = (
    "send.intent_reserved",
    "send.recipient_materialised",
    "send.row_written",
    "send.node_written",
    "send.head_replaced",
    "send.intent_cleaned",
)
"""The crash points of a send, in the order a send reaches them."""

POINTS = (
    "writer.before_commit",
    "writer.after_commit",
    "outbox.before_dispatch",
    "outbox.mid_dispatch",
    "outbox.after_route",
    *SEND_POINTS,
)

_hook: Callable[[str], None] | None = None


def hit(point: str) -> None:
    """Signal that execution reached ``point``."""
    hook = _hook
    if hook is not None:
        hook(point)


def install(hook: Callable[[str], None]) -> None:
    """Call ``hook(point)`` at every hit (replaces any previous hook)."""
    global _hook
    _hook = hook


def uninstall() -> None:
    global _hook
    _hook = None


def kill_at(point: str, nth: int = 1) -> None:
    """SIGKILL this process the ``nth`` time execution reaches ``point``."""
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}; known: {', '.join(POINTS)}")
    if nth < 1:
        raise ValueError("nth counts from 1")
    lock = threading.Lock()
    seen = 0

    def hook(reached: str) -> None:
        nonlocal seen
        if reached != point:
            return
        with lock:
            seen += 1
            if seen == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    install(hook)


def arm_from_environment() -> None:
    """Arm the crash point named by ``ORKEON_TEST_SEND_FAIL_AFTER`` (see the module
    docstring), only when ``ORKEON_TEST_HOOKS=1``; otherwise read nothing."""
    if os.environ.get("ORKEON_TEST_HOOKS") != "1":
        return
    point = os.environ.get("ORKEON_TEST_SEND_FAIL_AFTER")
    if not point:
        return
    if point not in POINTS and f"send.{point}" in POINTS:
        point = f"send.{point}"
    kill_at(point, int(os.environ.get("ORKEON_TEST_SEND_FAIL_NTH", "1")))
