"""Time, behind one seam.

Nothing in orkeon_actors calls ``time.time()`` directly: it asks a :class:`Clock`.
:class:`SystemClock` is real time; :class:`VirtualClock` only moves when told to, so a
simulation can jump an hour in a microsecond and stay deterministic.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from orkeon_actors.model.options import to_seconds

__all__ = ["Clock", "SystemClock", "VirtualClock", "format_utc"]


def format_utc(value: datetime) -> str:
    """The one timestamp format a model or a person reads: RFC 3339 in UTC with a ``Z``
    and microseconds, fixed width (``2026-01-01T12:00:00.000000Z``), so text order is
    time order. An aware datetime in another zone is converted; a naive one raises
    ``ValueError`` (timestamps are aware UTC datetimes everywhere in orkeon_actors)."""
    if value.tzinfo is None:
        raise ValueError(f"cannot format naive datetime {value!r}: timestamps are aware UTC datetimes")
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@runtime_checkable
class Clock(Protocol):
    """A source of time.

    ``now()`` is an aware UTC datetime (message timestamps); ``monotonic()`` is seconds
    on a never-decreasing scale (deadlines). ``add_listener`` registers a callback run
    after the clock jumps (virtual clocks only; a system clock never calls it).
    """

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    @property
    def is_virtual(self) -> bool: ...

    def add_listener(self, listener: Callable[[], None]) -> None: ...

    def remove_listener(self, listener: Callable[[], None]) -> None: ...


class SystemClock:
    """Wall-clock time for timestamps, ``time.monotonic`` for deadlines."""

    is_virtual = False

    # Both are C callables, not methods: the hub stamps every message with ``now()``, and
    # a Python frame per message is a measurable share of its hot path (issue 31).
    now: Callable[[], datetime] = staticmethod(functools.partial(datetime.now, UTC))
    """The current UTC time, an aware datetime."""
    monotonic: Callable[[], float] = staticmethod(time.monotonic)
    """``time.monotonic()``."""

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Real time does not jump: listeners are never called."""

    def remove_listener(self, listener: Callable[[], None]) -> None:
        """Nothing to remove."""


class VirtualClock:
    """A clock that moves only through :meth:`advance` (or :meth:`advance_to`).

    ``advance`` returns after every listener ran, so timers due at the new time have
    fired by the time it returns (the runtime's scheduler is such a listener).
    """

    is_virtual = True

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._start.tzinfo is None:
            raise ValueError("VirtualClock start must be an aware datetime (use tzinfo=timezone.utc)")
        self._elapsed = 0.0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    def advance(self, duration: float | int | timedelta) -> None:
        """Move time forward by ``duration`` (positive) and fire what became due."""
        seconds = to_seconds(duration, what="advance duration")
        with self._lock:
            self._elapsed += seconds
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def advance_to(self, monotonic: float) -> None:
        """Move time forward to the monotonic instant ``monotonic`` (no-op if past)."""
        delta = monotonic - self._elapsed
        if delta > 0:
            self.advance(delta)

    def add_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
