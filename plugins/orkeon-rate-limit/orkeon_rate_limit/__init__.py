"""orkeon-rate-limit: a per-crew token bucket on the publish path.

Each source crew has a bucket of ``burst`` tokens refilled at ``rate`` tokens per second
of the runtime's :class:`~orkeon_actors.model.clock.Clock` (so a simulation on a virtual
clock is rate-limited in virtual time, deterministically). A message costs one token; a
crew with an empty bucket is refused with
:class:`~orkeon_actors.errors.RateLimitedError`, whose ``retry_after`` says in how many
seconds one token will be back::

    import orkeon_actors as ok
    from orkeon_rate_limit import RateLimitMiddleware

    rt = ok.Runtime.start(middleware=[RateLimitMiddleware(rate=5.0, burst=10)])   # or "rate_limit"
    try:
        client.publish("orders.created", {...})
    except ok.errors.RateLimitedError as exc:
        retry_in = exc.retry_after
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping

import attrs

from orkeon_actors.errors import InvalidArgumentError, RateLimitedError
from orkeon_actors.middleware import MiddlewareContext, Next, current_operation
from orkeon_actors.model.clock import Clock, SystemClock
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

__all__ = ["Rate", "RateLimitMiddleware", "DEFAULT_OPERATIONS"]
__version__ = "0.1.0"

DEFAULT_OPERATIONS = frozenset({"publish", "post", "send"})
"""Operations that spend tokens by default. Replies are exempt: refusing one only turns
into the requester's timeout, and the request already paid."""

_EPSILON = 1e-9


def _positive_rate(instance: object, attribute: object, value: float) -> None:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0):
        raise InvalidArgumentError(f"rate must be a positive finite number of messages per second, got {value!r}")


def _positive_burst(instance: object, attribute: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"burst must be a positive integer, got {value!r}")


@attrs.frozen
class Rate:
    """``per_second`` tokens per second, at most ``burst`` saved up."""

    per_second: float = attrs.field(validator=_positive_rate)
    burst: int = attrs.field(validator=_positive_burst)


class RateLimitMiddleware:
    """Refuses a crew's messages beyond its rate (a token bucket per source crew).

    * ``rate`` / ``burst``: the default limit (default 50 messages/s, bursts of 100);
    * ``per_crew``: overrides by crew id, as :class:`Rate` or ``(rate, burst)`` pairs;
    * ``operations``: which publish-path operations spend a token (default publish, post,
      send; add ``"reply"`` to limit replies too);
    * ``exempt_system``: traffic of the hub's own ``_system`` crew is never limited
      (default ``True``);
    * ``clock``: the time source; ``None`` (default) uses the runtime's clock once
      attached (the system clock before).

    A refusal raises ``RateLimitedError(retry_after=seconds)`` to the caller of
    publish/post/send and delivers nothing. A token is spent when the stage lets the
    message pass, even if a later stage refuses it. State: one ``(tokens, instant)`` pair
    per crew that spent tokens recently, under one lock (the work inside is O(1)); buckets
    that have refilled completely are forgotten once more than ``max_tracked_crews`` are
    held, since a full bucket is the same as no bucket.
    """

    def __init__(
        self,
        rate: float = 50.0,
        burst: int = 100,
        *,
        per_crew: Mapping[str, Rate | tuple[float, int]] | None = None,
        operations: Iterable[str] = DEFAULT_OPERATIONS,
        exempt_system: bool = True,
        clock: Clock | None = None,
        max_tracked_crews: int = 10_000,
    ) -> None:
        self.default = Rate(rate, burst)
        self.per_crew: dict[CrewId, Rate] = {
            CrewId(crew): value if isinstance(value, Rate) else Rate(*value) for crew, value in (per_crew or {}).items()
        }
        self.operations = frozenset(operations)
        unknown = self.operations - {"publish", "post", "send", "reply"}
        if unknown:
            raise InvalidArgumentError(
                f"unknown operations {sorted(unknown)}: a rate limit applies to publish, post, send or reply"
            )
        self.exempt_system = exempt_system
        if isinstance(max_tracked_crews, bool) or not isinstance(max_tracked_crews, int) or max_tracked_crews < 1:
            raise InvalidArgumentError(f"max_tracked_crews must be a positive integer, got {max_tracked_crews!r}")
        self.max_tracked_crews = max_tracked_crews
        self._own_clock = clock is not None
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._buckets: dict[CrewId, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def attach(self, context: MiddlewareContext) -> None:
        """Count time on the runtime's clock unless a clock was given."""
        if not self._own_clock:
            self._clock = context.clock
            with self._lock:
                self._buckets.clear()

    def detach(self) -> None:
        """Back to the system clock (buckets measured on the old clock are dropped)."""
        if not self._own_clock:
            self._clock = SystemClock()
            with self._lock:
                self._buckets.clear()

    def rate_of(self, crew_id: str) -> Rate:
        """The limit applying to ``crew_id``."""
        return self.per_crew.get(CrewId(crew_id), self.default)

    def on_publish(self, message: Message, next: Next) -> Message:
        """Spend one of the source crew's tokens and pass ``message`` on, or raise
        ``RateLimitedError`` if the bucket is empty."""
        operation = current_operation()
        crew = message.source_crew_id
        if operation not in self.operations or (self.exempt_system and crew.is_system):
            return next(message)
        rate = self.per_crew.get(crew, self.default)
        retry_after = self._take(crew, rate)
        if retry_after is not None:
            raise RateLimitedError(
                f"crew {crew} exceeded its rate limit of {rate.per_second:g} messages/s (burst {rate.burst}) "
                f"on {operation}; retry in {retry_after:.3f} s",
                retry_after=retry_after,
            )
        return next(message)

    def on_receive(self, message: Message, next: Next) -> Message:
        """Receiving is never limited: passes ``message`` on."""
        return next(message)

    def _take(self, crew: CrewId, rate: Rate) -> float | None:
        """Spend a token: ``None`` on success, else the seconds until one is back."""
        now = self._clock.monotonic()
        with self._lock:
            bucket = self._buckets.get(crew)
            if bucket is None:
                tokens = float(rate.burst)
            else:
                tokens = min(float(rate.burst), bucket[0] + max(0.0, now - bucket[1]) * rate.per_second)
            if tokens >= 1.0 - _EPSILON:
                self._buckets[crew] = (max(0.0, tokens - 1.0), now)
                if len(self._buckets) > self.max_tracked_crews:
                    self._forget_full(now)
                return None
            self._buckets[crew] = (tokens, now)
            return (1.0 - tokens) / rate.per_second

    def _forget_full(self, now: float) -> None:
        for crew, (tokens, at) in list(self._buckets.items()):
            rate = self.per_crew.get(crew, self.default)
            if tokens + max(0.0, now - at) * rate.per_second >= rate.burst:
                del self._buckets[crew]

    def tokens(self, crew_id: str) -> float:
        """Tokens ``crew_id`` could spend now (for dashboards and tests)."""
        crew = CrewId(crew_id)
        rate = self.per_crew.get(crew, self.default)
        now = self._clock.monotonic()
        with self._lock:
            bucket = self._buckets.get(crew)
        if bucket is None:
            return float(rate.burst)
        return min(float(rate.burst), bucket[0] + max(0.0, now - bucket[1]) * rate.per_second)

    def __repr__(self) -> str:
        return f"RateLimitMiddleware(rate={self.default.per_second:g}/s, burst={self.default.burst})"
