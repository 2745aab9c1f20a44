"""Call options: PublishOptions, wait descriptors (spec §3.2) and wait timeouts (§9.1)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Final

import attrs

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.address import MailboxAddress, validate_topic_pattern
from orkeon_actors.model.ids import CorrelationId, CrewId
from orkeon_actors.model.message import FrozenMap, freeze_metadata

__all__ = [
    "PublishOptions",
    "WaitOnTopic",
    "WaitOnMailbox",
    "WaitOnReply",
    "WaitDescriptor",
    "FiniteWaitTimeout",
    "ForeverWaitTimeout",
    "FOREVER",
    "WaitTimeout",
    "to_seconds",
]


def to_seconds(value: float | int | timedelta, *, what: str = "timeout") -> float:
    """Coerce a duration (seconds as a number, or a ``timedelta``) to positive seconds.

    Raises ``InvalidArgumentError`` for zero, negative, NaN or non-numeric values.
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidArgumentError(
            f"{what} must be a number of seconds or a datetime.timedelta, got {type(value).__name__}"
        )
    if not seconds > 0 or math.isinf(seconds):
        raise InvalidArgumentError(
            f"{what} must be a positive, finite duration, got {value!r}; "
            "to wait without a limit use ok.FOREVER (waits only, never send)"
        )
    return seconds


def _optional_crew(value: str | None) -> CrewId | None:
    return None if value is None else CrewId(value)


def _optional_metadata(value: Mapping[str, str] | None) -> FrozenMap | None:
    return None if value is None else freeze_metadata(value)


@attrs.frozen
class PublishOptions:
    """Options of a publish (spec §3.2).

    ``target_crew_id`` scopes the message to one crew (``None`` = global).
    ``retain_as_last_value`` requires ``last_value_key``. ``schema_id`` engages the
    validation stage (§12.3).
    """

    target_crew_id: CrewId | None = attrs.field(default=None, converter=_optional_crew)
    metadata: FrozenMap | None = attrs.field(default=None, converter=_optional_metadata)
    retain_as_last_value: bool = False
    last_value_key: str | None = None
    schema_id: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.retain_as_last_value and not self.last_value_key:
            raise InvalidArgumentError(
                "retain_as_last_value=True requires last_value_key: name the slot the value is retained in"
            )
        if self.last_value_key is not None and not isinstance(self.last_value_key, str):
            raise InvalidArgumentError("last_value_key must be a string")
        if self.schema_id is not None and (not isinstance(self.schema_id, str) or not self.schema_id):
            raise InvalidArgumentError("schema_id must be a non-empty string when given")


DEFAULT_PUBLISH_OPTIONS: Final = PublishOptions()


@attrs.frozen
class WaitOnTopic:
    """Wait for the next message published on ``topic`` (a pattern: ``*`` one word,
    ``#`` zero or more) whose metadata contains every pair of ``metadata_match``."""

    topic: str = attrs.field(converter=validate_topic_pattern)
    metadata_match: FrozenMap | None = attrs.field(default=None, converter=_optional_metadata)


def _address(value: str | MailboxAddress) -> MailboxAddress:
    return MailboxAddress.parse(value)


@attrs.frozen
class WaitOnMailbox:
    """Wait for (and consume) the oldest message of a mailbox."""

    address: MailboxAddress = attrs.field(converter=_address)


@attrs.frozen
class WaitOnReply:
    """Wait for the reply to a request started with ``HubClient.request``."""

    correlation: CorrelationId = attrs.field(converter=CorrelationId)


WaitDescriptor = WaitOnTopic | WaitOnMailbox | WaitOnReply


@attrs.frozen
class FiniteWaitTimeout:
    """Give up after ``seconds``. Build with :meth:`of`, which rejects zero and negative
    durations."""

    seconds: float

    @classmethod
    def of(cls, duration: float | int | timedelta) -> FiniteWaitTimeout:
        return cls(to_seconds(duration))

    def __attrs_post_init__(self) -> None:
        to_seconds(self.seconds)

    @property
    def duration(self) -> timedelta:
        return timedelta(seconds=self.seconds)


@attrs.frozen
class ForeverWaitTimeout:
    """No limit: the wait ends on a match or a cancellation, never by itself."""

    def __repr__(self) -> str:
        return "FOREVER"


FOREVER: Final = ForeverWaitTimeout()

WaitTimeout = FiniteWaitTimeout | ForeverWaitTimeout


def coerce_wait_timeout(value: WaitTimeout | float | int | timedelta) -> WaitTimeout:
    """Accept a ``WaitTimeout``, a number of seconds or a ``timedelta``."""
    if isinstance(value, (FiniteWaitTimeout, ForeverWaitTimeout)):
        return value
    return FiniteWaitTimeout.of(value)
