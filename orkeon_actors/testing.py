"""Helpers for testing code built on orkeon_actors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["wait_until", "ConditionTimeout"]


class ConditionTimeout(AssertionError):
    """``wait_until`` gave up: the condition never held before the deadline."""


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> None:
    """Block until ``predicate()`` is truthy; raise ``ConditionTimeout`` after ``timeout``
    seconds of real time.

    This is how a test waits for another thread: on a condition, with a deadline, never a
    fixed sleep hoping a race has settled. The predicate is re-checked every millisecond.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise ConditionTimeout(f"timed out after {timeout}s waiting for {what}")
        pause.wait(0.001)
