"""The bounds of hostile input: every size an agent (or any caller) can make grow.

An agent's tool call is untrusted input (its model may be prompt-injected). Each bound
below is checked where the input enters, before anything is stored or routed, and an
overflow raises :class:`~orkeon_actors.errors.LimitExceededError` naming the bound, its
value and what to do. ``docs/security.md`` lists them all and how each is tested.

Fixed bounds (the wire formats every adapter must honour):

* :data:`MAX_TOPIC_BYTES` (255, the AMQP routing-key limit) and :data:`MAX_TOPIC_WORDS`;
* :data:`MAX_JSON_DEPTH` (128): nesting of a JSON payload or of tool arguments;
* :data:`MAX_METADATA_ENTRIES`, :data:`MAX_METADATA_KEY_BYTES`,
  :data:`MAX_METADATA_VALUE_BYTES`.

Per-runtime bounds (:class:`Limits`, ``Runtime.start(max_payload_bytes=..., limits=...)``):
the payload size and what one caller (crew, agent) may hold at once: pending requests,
blocked waits, open subscriptions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import attrs

from orkeon_actors.errors import InvalidArgumentError, LimitExceededError

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "Limits",
    "MAX_JSON_DEPTH",
    "MAX_METADATA_ENTRIES",
    "MAX_METADATA_KEY_BYTES",
    "MAX_METADATA_VALUE_BYTES",
    "MAX_TOPIC_BYTES",
    "MAX_TOPIC_WORDS",
    "check_json_text_depth",
    "json_too_deep",
    "check_metadata_bounds",
    "check_payload_size",
    "check_topic_bounds",
]

MAX_TOPIC_BYTES: Final = 255
"""The longest topic or topic pattern, in bytes: the AMQP routing-key limit, which the
distributed hub meets anyway, so a topic means the same on every adapter."""

MAX_TOPIC_WORDS: Final = 64
"""The most dot-separated words in a topic or pattern."""

MAX_JSON_DEPTH: Final = 128
"""The deepest nesting of arrays and objects in a JSON payload or in tool arguments
(``[[1]]`` has depth 2; a scalar has depth 0)."""

MAX_METADATA_ENTRIES: Final = 64
MAX_METADATA_KEY_BYTES: Final = 256
MAX_METADATA_VALUE_BYTES: Final = 8192

DEFAULT_MAX_PAYLOAD_BYTES: Final = 16 * 1024 * 1024
"""``Runtime.start(max_payload_bytes=...)`` default: 16 MiB."""


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"Limits.{attribute.name} must be a positive int, got {value!r}")


@attrs.frozen
class Limits:
    """The per-runtime bounds. Each overflow raises ``LimitExceededError`` naming it.

    * ``max_payload_bytes``: the largest encoded payload of a publish, post, send,
      request or reply (default 16 MiB);
    * ``max_pending_requests``: requests one caller (crew, agent) may have awaiting a
      reply at once (``send`` and ``request``);
    * ``max_waits``: ``wait_for`` calls one caller may have blocked at once;
    * ``max_subscriptions``: subscriptions one caller may hold open at once (each
      ``wait_for_event`` cursor holds one).
    """

    max_payload_bytes: int = attrs.field(default=DEFAULT_MAX_PAYLOAD_BYTES, validator=_positive)
    max_pending_requests: int = attrs.field(default=1024, validator=_positive)
    max_waits: int = attrs.field(default=1024, validator=_positive)
    max_subscriptions: int = attrs.field(default=1024, validator=_positive)


DEFAULT_LIMITS: Final = Limits()


def _exceeded(bound: str, limit: int, what: str, advice: str) -> LimitExceededError:
    return LimitExceededError(f"{what} exceeds {bound} ({limit}); {advice}", bound=bound, limit=limit)


def check_topic_bounds(topic: str) -> None:
    """Raise ``LimitExceededError`` if ``topic`` (a topic or a pattern) is longer than
    :data:`MAX_TOPIC_BYTES` or has more than :data:`MAX_TOPIC_WORDS` words."""
    size = len(topic) if len(topic) > MAX_TOPIC_BYTES else len(topic.encode("utf-8", "surrogatepass"))
    if size > MAX_TOPIC_BYTES:
        raise _exceeded("MAX_TOPIC_BYTES", MAX_TOPIC_BYTES, f"a topic of {size} bytes", "use a shorter topic name")
    words = topic.count(".") + 1
    if words > MAX_TOPIC_WORDS:
        raise _exceeded(
            "MAX_TOPIC_WORDS", MAX_TOPIC_WORDS, f"a topic of {words} words", "use fewer dot-separated words"
        )


def check_payload_size(size: int, limits: Limits) -> None:
    """Raise ``LimitExceededError`` if an encoded payload of ``size`` bytes is over
    ``limits.max_payload_bytes``."""
    if size > limits.max_payload_bytes:
        raise _exceeded(
            "max_payload_bytes",
            limits.max_payload_bytes,
            f"a payload of {size} bytes",
            "send a reference (a path, a URL, a key of a retained value) instead of the data, "
            "or raise Runtime.start(max_payload_bytes=...)",
        )


def check_metadata_bounds(metadata: Mapping[str, str]) -> None:
    """Raise ``LimitExceededError`` if ``metadata`` has more than
    :data:`MAX_METADATA_ENTRIES` entries or a key / value over its byte bound."""
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise _exceeded(
            "MAX_METADATA_ENTRIES",
            MAX_METADATA_ENTRIES,
            f"metadata with {len(metadata)} entries",
            "put bulk data in the payload",
        )
    for key, value in metadata.items():
        if isinstance(key, str) and len(key.encode("utf-8", "surrogatepass")) > MAX_METADATA_KEY_BYTES:
            raise _exceeded(
                "MAX_METADATA_KEY_BYTES", MAX_METADATA_KEY_BYTES, f"metadata key {key[:32]!r}...", "use a shorter key"
            )
        if isinstance(value, str) and len(value.encode("utf-8", "surrogatepass")) > MAX_METADATA_VALUE_BYTES:
            raise _exceeded(
                "MAX_METADATA_VALUE_BYTES",
                MAX_METADATA_VALUE_BYTES,
                f"the metadata value of {key[:32]!r}",
                "put bulk data in the payload",
            )


def json_too_deep(depth: int) -> LimitExceededError:
    """The error for JSON nested ``depth`` levels (over :data:`MAX_JSON_DEPTH`)."""
    return _exceeded("MAX_JSON_DEPTH", MAX_JSON_DEPTH, f"JSON nested {depth} levels deep", "flatten the structure")


_STRINGS_OR_BRACKETS = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def check_json_text_depth(text: str | bytes) -> None:
    """Raise ``LimitExceededError`` if the JSON document ``text`` opens arrays and
    objects deeper than :data:`MAX_JSON_DEPTH`, before any parser recurses into it.
    Brackets inside strings do not count. Linear in the length of ``text``."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= MAX_JSON_DEPTH:
        return  # too few brackets to nest that deep: the common case, at C speed
    depth = 0
    for match in _STRINGS_OR_BRACKETS.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise json_too_deep(depth)
        elif token in (b"]", b"}"):
            depth -= 1
