"""``RateLimit``: how fast a provider may be called, shared by every model that calls it.

A provider limits requests and tokens per minute and answers a 429 with a
``Retry-After``. An adapter awaits :meth:`RateLimit.acquire` before each attempt, so:

* at most ``requests_per_minute`` requests and ``tokens_per_minute`` tokens (estimated
  before the call, corrected with the usage the provider reports) start per minute, as
  token buckets refilled continuously (a full bucket allows a burst of that size);
* a ``Retry-After`` one call received (:meth:`RateLimit.hold`) holds back every call
  through the same limit until it passes, not only the call that got the 429;
* a call over the limit waits (``asyncio.sleep`` on the I/O loop, no thread held): calls
  are queued, never dropped or failed by the limit.

Each ``(provider, base_url)`` gets one shared limit by default (:func:`shared_limit`:
no rate, only the ``Retry-After`` hold); pass ``rate_limit=RateLimit(...)`` to an adapter
(the same object to every model sharing an account) to bound the rates. Thread-safe: a
limit may be shared by models on several runtimes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from orkeon_actors.errors import ModelConfigError

__all__ = ["RateLimit", "shared_limit"]


def _rate(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ModelConfigError(f"{name} must be a positive number per minute, got {value!r}")
    return float(value)


class RateLimit:
    """Requests and tokens per minute (``None``: unbounded) and the provider's hold."""

    def __init__(
        self,
        *,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.requests_per_minute = _rate("requests_per_minute", requests_per_minute)
        self.tokens_per_minute = _rate("tokens_per_minute", tokens_per_minute)
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._requests = self.requests_per_minute or 0.0
        self._tokens = self.tokens_per_minute or 0.0
        self._refilled = now
        self._held_until = now
        self.waits = 0
        """How many times a call had to wait (for a test or a metric)."""

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._refilled)
        self._refilled = now
        if self.requests_per_minute is not None:
            self._requests = min(self.requests_per_minute, self._requests + elapsed * self.requests_per_minute / 60)
        if self.tokens_per_minute is not None:
            self._tokens = min(self.tokens_per_minute, self._tokens + elapsed * self.tokens_per_minute / 60)

    def _delay(self, tokens: int, hold: bool) -> float:
        """Seconds to wait before a call of ``tokens`` may start, or 0 (then taken)."""
        now = self._clock()
        self._refill(now)
        wait = max(0.0, self._held_until - now) if hold else 0.0
        rpm, tpm = self.requests_per_minute, self.tokens_per_minute
        if rpm is not None and self._requests < 1:
            wait = max(wait, (1 - self._requests) * 60 / rpm)
        if tpm is not None:
            wanted = min(float(tokens), tpm)  # a call larger than the bucket goes once it is full
            if self._tokens < wanted:
                wait = max(wait, (wanted - self._tokens) * 60 / tpm)
        if wait > 0:
            return wait
        if rpm is not None:
            self._requests -= 1
        if tpm is not None:
            self._tokens -= tokens
        return 0.0

    async def acquire(self, tokens: int = 0, *, hold: bool = True) -> None:
        """Wait until a call of about ``tokens`` tokens may start, and take its share.
        ``hold=False``: not held back by :meth:`hold` (the retry of the call that got
        the 429, which paused for its ``Retry-After`` already)."""
        while True:
            with self._lock:
                delay = self._delay(tokens, hold)
            if delay <= 0:
                return
            self.waits += 1
            await asyncio.sleep(delay)

    def settle(self, estimated: int, used: int) -> None:
        """The call estimated at ``estimated`` tokens used ``used``: the bucket is
        corrected by the difference."""
        if self.tokens_per_minute is not None:
            with self._lock:
                self._tokens = min(self.tokens_per_minute, self._tokens + estimated - used)

    def hold(self, seconds: float) -> None:
        """The provider asked to wait ``seconds`` (a 429's ``Retry-After``): no call
        through this limit starts before then."""
        with self._lock:
            self._held_until = max(self._held_until, self._clock() + seconds)


_shared: dict[tuple[str, str | None], RateLimit] = {}
_shared_lock = threading.Lock()


def shared_limit(provider: str, base_url: str | None) -> RateLimit:
    """The process-wide limit of ``provider`` at ``base_url`` (made at first use)."""
    key = (provider, base_url)
    with _shared_lock:
        limit = _shared.get(key)
        if limit is None:
            limit = _shared[key] = RateLimit()
        return limit
