"""Stopping what is still running when the interpreter exits.

A program that never calls ``Runtime.stop()`` must still exit, and exit cleanly: every
thread of the runtime is a daemon thread (the interpreter does not wait for it), and
:func:`stop_at_exit` registers an object whose ``stop()`` runs from an ``atexit`` hook,
while those threads still run. The hook stops the registered objects newest first (a
crew supervisor before the runtime it runs on), so a durable store commits what it
accepted and closes its file. An object unregisters with :func:`forget_at_exit` when it
is stopped explicitly. A ``stop()`` that raises is logged and the others still run.
"""

from __future__ import annotations

import atexit
import threading
from typing import Protocol

from loguru import logger

__all__ = ["Stoppable", "forget_at_exit", "stop_at_exit"]


class Stoppable(Protocol):
    def stop(self) -> None: ...


_lock = threading.Lock()
_live: dict[int, Stoppable] = {}


def stop_at_exit(obj: Stoppable) -> None:
    """Call ``obj.stop()`` at interpreter exit unless :func:`forget_at_exit` ran first."""
    with _lock:
        _live[id(obj)] = obj


def forget_at_exit(obj: Stoppable) -> None:
    """Undo :func:`stop_at_exit` (``obj`` was stopped explicitly); idempotent."""
    with _lock:
        _live.pop(id(obj), None)


def stop_all() -> None:
    """Stop every registered object, newest first (what the ``atexit`` hook runs)."""
    with _lock:
        objects = list(_live.values())
        _live.clear()
    for obj in reversed(objects):
        try:
            obj.stop()
        except Exception:  # the remaining objects must still be stopped
            logger.opt(exception=True).error("stopping {!r} at interpreter exit failed", obj)


atexit.register(stop_all)
