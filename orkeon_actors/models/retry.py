"""When a failed model call is tried again, and how long to wait first.

The SDKs' own retries are turned off (``max_retries=0``) and this policy replaces them,
for three reasons: one rule for every provider (the SDKs differ in the statuses and
headers they obey); every wait goes through an injectable ``sleep``, so a test checks
the delays without waiting them; and a server asking for a longer pause than
:attr:`RetryPolicy.max_retry_after` fails the call at once with a reason, instead of
being silently replaced by a shorter backoff (which only earns another 429).

Retried: 408, 409, 429 and every 5xx, timeouts and connection failures. Never retried:
any other 4xx (the request itself is wrong), and a response that is not the provider's
documented wire format.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime

import attrs

from orkeon_actors.errors import ModelConfigError

__all__ = ["RETRYABLE_STATUSES", "RetryPolicy", "is_retryable_status", "parse_retry_after"]

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""4xx statuses worth another attempt (request timeout, lock conflict, rate limit)."""


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the server asks to wait, from ``retry-after-ms`` (OpenAI's and
    Anthropic's millisecond header) or ``Retry-After`` (seconds, or an HTTP date, RFC
    9110 §10.2.3); ``None`` when absent or unreadable. A date in the past gives 0."""
    lowered = {k.lower(): v for k, v in headers.items()}
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lowered.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _non_negative(name: str) -> Callable[[object, attrs.Attribute[float], float], None]:
    def check(_instance: object, _attribute: attrs.Attribute[float], value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or not math.isfinite(value):
            raise ModelConfigError(f"retry {name} must be a finite number >= 0, got {value!r}")

    return check


def _max_retries(_instance: object, _attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ModelConfigError(f"max_retries must be an int >= 0, got {value!r}")


@attrs.frozen
class RetryPolicy:
    """How a model adapter retries.

    * ``max_retries``: attempts after the first (0 disables retrying).
    * Backoff without a ``Retry-After``: ``initial_backoff * 2**n`` capped at
      ``max_backoff``, less a random 0-25 % (jitter, so crews that failed together do
      not retry together).
    * ``Retry-After`` / ``retry-after-ms`` are honoured exactly when at most
      ``max_retry_after`` seconds; a longer one fails the call at once.
    * ``sleep`` waits: ``asyncio.sleep`` (awaited on the I/O loop, holding no thread);
      a plain function is called instead (a test passes a recorder). ``rng`` draws the
      jitter.
    """

    max_retries: int = attrs.field(default=3, validator=_max_retries)
    initial_backoff: float = attrs.field(default=0.5, validator=_non_negative("initial_backoff"))
    max_backoff: float = attrs.field(default=8.0, validator=_non_negative("max_backoff"))
    max_retry_after: float = attrs.field(default=60.0, validator=_non_negative("max_retry_after"))
    sleep: Callable[[float], Awaitable[None] | None] = attrs.field(default=asyncio.sleep, eq=False, repr=False)
    rng: random.Random = attrs.field(factory=random.Random, eq=False, repr=False)

    def backoff(self, retry: int) -> float:
        """The pause before retry number ``retry`` (0 for the first) when the server
        named none."""
        base = min(self.initial_backoff * 2.0 ** min(retry, 60), self.max_backoff)
        return base * (1.0 - 0.25 * self.rng.random())

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> RetryPolicy:
        """A policy from a configuration mapping with any of ``max_retries``,
        ``initial_backoff``, ``max_backoff``, ``max_retry_after``."""
        known = {"max_retries", "initial_backoff", "max_backoff", "max_retry_after"}
        unknown = set(config) - known
        if unknown:
            raise ModelConfigError(f"unknown retry settings {sorted(unknown)}; the settings are {sorted(known)}")
        return cls(**config)  # type: ignore[arg-type]
