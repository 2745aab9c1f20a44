"""The canonical message envelope (spec §6.1) and the immutable metadata map."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Final

import attrs

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.limits import MAX_JSON_DEPTH, check_json_text_depth, check_metadata_bounds, json_too_deep

__all__ = [
    "FrozenMap",
    "Message",
    "stamped_message",
    "NO_DECLARED_SCHEMA_ID",
    "WAIT_TIMED_OUT_TOPIC",
    "encode_payload",
    "freeze_metadata",
]

NO_DECLARED_SCHEMA_ID: Final = "_none"
"""``schema_id`` of a message that declares no contract (every post, send and reply)."""

WAIT_TIMED_OUT_TOPIC: Final = "_system.wait_timed_out"


class FrozenMap(Mapping[str, str]):
    """An immutable, hashable ``str -> str`` mapping (message metadata)."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[str, str] | None = None) -> None:
        self._data: dict[str, str] = dict(data) if data else {}
        self._hash: int | None = None

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def merged(self, extra: Mapping[str, str]) -> FrozenMap:
        """A copy with ``extra`` added (``extra`` wins on conflicts)."""
        if not extra:
            return self
        return FrozenMap({**self._data, **extra})


EMPTY_METADATA: Final = FrozenMap()


def freeze_metadata(metadata: Mapping[str, str] | None) -> FrozenMap:
    """Validate and freeze a metadata mapping: keys and values must be strings, within
    the bounds of :mod:`orkeon_actors.model.limits` (``LimitExceededError`` beyond). A
    :class:`FrozenMap` is returned as it is (it was validated when it was built)."""
    if metadata is None:
        return EMPTY_METADATA
    if type(metadata) is FrozenMap:  # no len() call: a FrozenMap's is a Python one (every message)
        return metadata
    if not metadata:
        return EMPTY_METADATA
    if isinstance(metadata, FrozenMap):
        return metadata
    if not isinstance(metadata, Mapping):
        raise InvalidArgumentError(f"metadata must be a mapping of strings to strings, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgumentError(
                f"metadata must map strings to strings; entry {key!r}: {value!r} is not "
                "(convert values with str() or json.dumps())"
            )
    check_metadata_bounds(metadata)
    return FrozenMap(metadata)


def encode_payload(payload: object) -> bytes:
    """Bytes pass through; anything else is JSON-encoded (compact, UTF-8), strictly.

    Raises ``InvalidArgumentError`` for a value strict JSON cannot represent (NaN and the
    infinities included: they would make a tool result invalid JSON for an LLM API), and
    ``LimitExceededError`` for one nested deeper than ``MAX_JSON_DEPTH``.
    """
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    try:
        encoded = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except RecursionError:  # the C encoder's own depth guard: far deeper than the bound
        raise json_too_deep(MAX_JSON_DEPTH + 1) from None
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"payload of type {type(payload).__name__} is neither bytes nor JSON-serialisable: {exc}"
        ) from None
    check_json_text_depth(encoded)
    return encoded


@attrs.frozen(slots=True, weakref_slot=False)
class Message:
    """One message, immutable. Every field is stamped by the hub except what the caller
    chose (topic, payload, metadata, targets, schema id).

    * ``source_crew_id`` is always set and comes from the caller's binding: an agent
      cannot forge it (anti-spoofing, spec §6.1). ``source_agent_id`` is ``None`` for the
      system.
    * ``target_crew_id`` is ``None`` for a global broadcast; for mailbox traffic it is
      derived from ``target_mailbox``.
    * ``payload`` is bytes; :meth:`json` decodes a JSON payload.
    * ``published_at`` is an aware UTC datetime taken from the runtime's clock.
    """

    id: MessageId
    topic: str
    source_crew_id: CrewId
    published_at: datetime
    payload: bytes = b""
    metadata: FrozenMap = attrs.field(default=EMPTY_METADATA, converter=freeze_metadata)
    source_agent_id: AgentId | None = None
    target_crew_id: CrewId | None = None
    target_mailbox: MailboxAddress | None = None
    correlation_id: CorrelationId | None = None
    schema_id: str = NO_DECLARED_SCHEMA_ID

    def json(self) -> Any:
        """Decode the payload as JSON. Raises ``ValueError`` if it is not JSON; an empty
        payload decodes to ``None``."""
        if not self.payload:
            return None
        return json.loads(self.payload)

    def with_metadata(self, extra: Mapping[str, str]) -> Message:
        """A copy of this message with ``extra`` merged into its metadata (``extra`` wins
        on a conflict); every other field is kept. This message itself when ``extra`` is
        empty. Raises ``InvalidArgumentError`` when ``extra`` is not a mapping of strings.

        On the hot path of the telemetry stage (trace context on every message): the
        copy is built field by field, here and only here, at half the cost of
        ``attrs.evolve`` (a test checks it keeps every field)."""
        if not extra:
            return self
        return Message(
            self.id,
            self.topic,
            self.source_crew_id,
            self.published_at,
            self.payload,
            self.metadata.merged(freeze_metadata(extra)),
            self.source_agent_id,
            self.target_crew_id,
            self.target_mailbox,
            self.correlation_id,
            self.schema_id,
        )

    @classmethod
    def wait_timed_out(
        cls,
        *,
        message_id: MessageId,
        at: datetime,
        original_topic: str,
        wait_id: str,
        started_at: datetime,
        target_crew_id: CrewId | None,
    ) -> Message:
        """The hub's ``WaitTimedOutMessage`` (spec §9.2): from the system, topic
        :data:`WAIT_TIMED_OUT_TOPIC`, published ``at`` the expiry, with the metadata
        ``original_topic`` (the waited topic, mailbox address or correlation id),
        ``original_wait_id`` and ``original_started_at`` (fixed-width RFC 3339 UTC,
        :func:`~orkeon_actors.model.clock.format_utc`), scoped to
        ``target_crew_id`` (``None`` for a wait of the system)."""
        from orkeon_actors.model.clock import format_utc  # clock -> options -> message: imported at use

        return cls(
            id=message_id,
            topic=WAIT_TIMED_OUT_TOPIC,
            source_crew_id=CrewId.SYSTEM,
            published_at=at,
            metadata=FrozenMap(
                {
                    "original_topic": original_topic,
                    "original_wait_id": wait_id,
                    "original_started_at": format_utc(started_at),
                }
            ),
            target_crew_id=target_crew_id,
        )

    @property
    def is_timeout(self) -> bool:
        """True for the hub's ``WaitTimedOutMessage`` (spec §9.2)."""
        return self.topic == WAIT_TIMED_OUT_TOPIC and self.source_crew_id.is_system


class _Unfrozen:
    """:class:`Message`'s slots, without its frozen ``__setattr__``: what
    :func:`stamped_message` fills before making it a :class:`Message`."""

    __slots__ = Message.__slots__  # the same, in the same order: the layouts must match

    id: MessageId
    topic: str
    source_crew_id: CrewId
    published_at: datetime
    payload: bytes
    metadata: FrozenMap
    source_agent_id: AgentId | None
    target_crew_id: CrewId | None
    target_mailbox: MailboxAddress | None
    correlation_id: CorrelationId | None
    schema_id: str


def stamped_message(
    message_id: MessageId,
    topic: str,
    source_crew_id: CrewId,
    published_at: datetime,
    payload: bytes,
    metadata: FrozenMap,
    source_agent_id: AgentId | None,
    target_crew_id: CrewId | None,
    target_mailbox: MailboxAddress | None,
    correlation_id: CorrelationId | None,
    schema_id: str,
) -> Message:
    """``Message(...)`` for the hub, which stamps every message: each field already
    valid, ``metadata`` already frozen (:func:`freeze_metadata`). The same frozen
    :class:`Message` (equal, hashed, compared and evolved alike), built at a quarter of
    the cost: attrs' frozen ``__init__`` sets each of the 11 slots through
    ``object.__setattr__``, a C call each; here the slots are filled by plain
    attribute stores on an instance of a class with the very same slots, which then
    becomes a ``Message`` (``__class__`` assignment, which CPython allows between
    classes of the same layout). Issue 31: the hub's send/reply round trip builds two."""
    message = object.__new__(_Unfrozen)
    message.id = message_id
    message.topic = topic
    message.source_crew_id = source_crew_id
    message.published_at = published_at
    message.payload = payload
    message.metadata = metadata
    message.source_agent_id = source_agent_id
    message.target_crew_id = target_crew_id
    message.target_mailbox = target_mailbox
    message.correlation_id = correlation_id
    message.schema_id = schema_id
    message.__class__ = Message  # type: ignore[assignment]
    return message  # type: ignore[return-value]
