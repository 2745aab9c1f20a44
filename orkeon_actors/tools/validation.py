"""Field rules of the tool requests (spec §5.1), used as attrs converters by the DTOs.

Each rule takes the field's wire name and the raw value, and returns the value in its
domain type. Every rule raises :class:`~orkeon_actors.errors.ToolValidationError` naming the field it
guards, with a message written for the model that made the call: what was wrong and what
to send instead. The same rules run whether a request DTO is built from JSON by the
converter or constructed directly in Python, so both paths accept and refuse the same
inputs.

Optional fields accept ``null`` as "not given": models often send ``null`` for an unused
optional argument, and refusing it would only cost them a turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from orkeon_actors.errors import EventHubError, ToolValidationError
from orkeon_actors.model.address import MailboxAddress, validate_topic, validate_topic_pattern
from orkeon_actors.model.ids import CorrelationId, CrewId
from orkeon_actors.model.message import FrozenMap, encode_payload, freeze_metadata
from orkeon_actors.wire.base import json_kind

__all__ = [
    "GLOBAL_SCOPE",
    "MAX_TIMEOUT_MS",
    "check_exactly_one_wait",
    "field_names",
    "json_kind",
    "to_correlation_id",
    "to_crew_id",
    "to_crew_scope",
    "to_flag",
    "to_forever_flag",
    "to_key",
    "to_mailbox",
    "to_metadata",
    "to_payload",
    "to_timeout_ms",
    "to_topic",
    "to_topic_pattern",
]

MAX_TIMEOUT_MS: Final = 2_147_483_647
"""The largest accepted ``timeout_ms`` (2^31 - 1 ms, about 24.8 days): a finite timeout
must stay finite in every runtime a tool result may travel to."""

GLOBAL_SCOPE: Final = "_global"
"""``crew_scope`` value naming the global last-value slot (what a ``publish_event``
without ``target_crew_id`` retains into). No crew id can take it: crew ids cannot start
with ``_``."""


def _wrong_type(field: str, expected: str, value: object) -> ToolValidationError:
    return ToolValidationError(f"{field} must be {expected}, got {json_kind(value)} {value!r}", field=field)


def _string(field: str, value: object, expected: str = "a string") -> str:
    if not isinstance(value, str):
        raise _wrong_type(field, expected, value)
    return value


def _rephrase(field: str, call: Callable[[], Any]) -> Any:
    """Run ``call``; turn a hub argument error into a ToolValidationError naming ``field``."""
    try:
        return call()
    except ToolValidationError:
        raise
    except (EventHubError, ValueError) as exc:
        raise ToolValidationError(f"{field}: {exc}", field=field) from None


def to_topic(field: str, value: object) -> str:
    """A concrete topic name: dot-separated words, no wildcard."""
    topic = _string(field, value, "a topic name such as 'orders.created'")
    return str(_rephrase(field, lambda: validate_topic(topic)))


def to_topic_pattern(field: str, value: object) -> str:
    """A topic pattern: words, ``*`` (one word) or ``#`` (zero or more words)."""
    pattern = _string(field, value, "a topic pattern such as 'orders.*'")
    return str(_rephrase(field, lambda: validate_topic_pattern(pattern)))


def to_key(field: str, value: object) -> str:
    """A non-empty string key."""
    key = _string(field, value, "a non-empty string")
    if not key:
        raise ToolValidationError(f"{field} must be a non-empty string", field=field)
    return key


def to_mailbox(field: str, value: object) -> MailboxAddress:
    """A mailbox address (``agent://crew/agent``, ``crew://crew``, ``topic://name``,
    ``client://name``)."""
    if isinstance(value, MailboxAddress):
        return value
    text = _string(field, value, "a mailbox address such as 'agent://crew/agent'")
    address: MailboxAddress = _rephrase(field, lambda: MailboxAddress.parse(text))
    return address


def to_crew_id(field: str, value: object) -> CrewId | None:
    """An optional crew id."""
    if value is None:
        return None
    text = _string(field, value, "a crew id")
    crew: CrewId = _rephrase(field, lambda: CrewId(text))
    return crew


def to_crew_scope(field: str, value: object) -> str | None:
    """An optional crew id, or :data:`GLOBAL_SCOPE` for the global slot."""
    if value is None:
        return None
    text = _string(field, value, f"a crew id or {GLOBAL_SCOPE!r}")
    if text == GLOBAL_SCOPE:
        return text
    crew: CrewId = _rephrase(field, lambda: CrewId(text))
    return str(crew)


def to_correlation_id(field: str, value: object) -> CorrelationId:
    """A correlation id (a 26-character ULID)."""
    text = _string(field, value, "a correlation id (26-character ULID)")
    correlation: CorrelationId = _rephrase(field, lambda: CorrelationId(text))
    return correlation


def to_timeout_ms(field: str, value: object) -> int:
    """A positive whole number of milliseconds up to :data:`MAX_TIMEOUT_MS`.

    JSON has one number type, so an integral float (``1000.0``) is accepted as ``1000``.
    """
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong_type(field, "a positive integer number of milliseconds", value)
    if value <= 0:
        raise ToolValidationError(
            f"{field} must be a positive number of milliseconds, got {value}; "
            "give how long to wait, for example 30000 for 30 seconds",
            field=field,
        )
    if value > MAX_TIMEOUT_MS:
        raise ToolValidationError(
            f"{field} must be at most {MAX_TIMEOUT_MS} milliseconds (about 24.8 days), got {value}",
            field=field,
        )
    return value


def to_flag(field: str, value: object) -> bool | None:
    """An optional boolean (``null`` = not given)."""
    if value is None or isinstance(value, bool):
        return value
    raise _wrong_type(field, "true or false", value)


def to_forever_flag(field: str, value: object) -> bool | None:
    """``true`` or not given: Forever is an explicit opt-in (spec §5.1), never a default,
    so ``false`` is refused rather than silently meaning "use timeout_ms"."""
    if value is None or value is True:
        return value
    raise ToolValidationError(
        f"{field} only accepts true; to wait a limited time omit {field} and give timeout_ms, "
        f"got {json_kind(value)} {value!r}",
        field=field,
    )


def to_metadata(field: str, value: object) -> FrozenMap | None:
    """An optional JSON object of string values, frozen."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _wrong_type(field, "an object mapping strings to strings", value)
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ToolValidationError(
                f"{field} must map strings to strings; entry {key!r} has {json_kind(item)} "
                f'{item!r} (send numbers and booleans as strings, e.g. "42")',
                field=field,
            )
    frozen: FrozenMap = freeze_metadata(value)
    return frozen


def to_payload(field: str, value: object) -> Any:
    """Any JSON value (``null`` included). Refuses what strict JSON cannot represent
    (NaN, infinities, sets, arbitrary objects) and nesting deeper than
    ``MAX_JSON_DEPTH``: the hub's own encoder decides, so the tools accept exactly what
    the hub would."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise _wrong_type(field, "a JSON value", value)
    try:
        encode_payload(value)
    except EventHubError as exc:
        raise ToolValidationError(f"{field} must be a JSON value: {exc}", field=field) from None
    return value


def check_exactly_one_wait(instance: object) -> None:
    """Spec §5.1: exactly one of ``timeout_ms`` / ``wait_forever: true``."""
    timeout_ms = getattr(instance, "timeout_ms", None)
    forever = getattr(instance, "wait_forever", None)
    if timeout_ms is not None and forever:
        raise ToolValidationError(
            "give either timeout_ms or wait_forever: true, not both: omit wait_forever to wait "
            "at most timeout_ms, or omit timeout_ms to wait without a limit",
            field="wait_forever",
        )
    if timeout_ms is None and not forever:
        raise ToolValidationError(
            "say how long to wait: give timeout_ms (a positive number of milliseconds) or "
            "wait_forever: true to wait without a limit; there is no default",
            field="timeout_ms",
        )


def field_names(cls: type) -> tuple[str, ...]:
    """The wire names of an attrs class, in declaration order."""
    return tuple(a.name for a in attrs.fields(cls))
