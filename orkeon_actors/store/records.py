"""The values the store keeps besides messages: crew snapshots, pending waits, outbox
rows. Frozen attrs classes; rows are (de)serialised by :data:`~orkeon_actors.store.codec.converter`."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CorrelationId, CrewId
from orkeon_actors.model.message import FrozenMap, Message, freeze_metadata
from orkeon_actors.store.codec import converter

__all__ = [
    "CrewState",
    "OutboxState",
    "PendingWaitKind",
    "PendingWaitRecord",
    "SnapshotRecord",
    "OutboxRecord",
]


class CrewState(enum.Enum):
    """A crew's state in ``crew_snapshots.state`` (spec §11.1, plus ``Active``).

    ``Active`` crews are never purged; ``Completed`` ones are deleted at once; ``Failed``
    ones after the failed retention; ``Asleep`` ones while they have no pending wait and
    are older than the orphan TTL (see :class:`~orkeon_actors.store.config.PurgePolicy`).
    """

    ACTIVE = "Active"
    ASLEEP = "Asleep"
    FAILED = "Failed"
    COMPLETED = "Completed"


class OutboxState(enum.Enum):
    PENDING = "Pending"
    DISPATCHED = "Dispatched"
    FAILED = "Failed"


class PendingWaitKind(enum.Enum):
    ON_TOPIC = "OnTopic"
    ON_MAILBOX = "OnMailbox"
    ON_REPLY = "OnReply"


def _optional_crew(value: str | None) -> CrewId | None:
    return None if value is None else CrewId(value)


def _optional_address(value: MailboxAddress | str | None) -> MailboxAddress | None:
    return None if value is None else MailboxAddress.parse(value)


def _optional_correlation(value: str | None) -> CorrelationId | None:
    return None if value is None else CorrelationId(value)


def _optional_metadata(value: FrozenMap | dict[str, str] | None) -> FrozenMap | None:
    return None if value is None else freeze_metadata(value)


def _aware(instance: object, attribute: attrs.Attribute[Any], value: datetime | None) -> None:
    if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
        raise InvalidArgumentError(f"{attribute.name} must be an aware datetime, got {value!r}")


@attrs.frozen
class SnapshotRecord:
    """One row of ``crew_snapshots``: a crew's serialised state (spec §8.1) and where it
    is in its lifecycle."""

    crew_id: CrewId = attrs.field(converter=CrewId)
    snapshot: bytes
    mode: str
    schema_version: int
    snapshot_at: datetime = attrs.field(validator=_aware)
    state: CrewState = attrs.field(converter=CrewState)


@attrs.frozen
class PendingWaitRecord:
    """One row of ``pending_waits`` (spec §8.3): a wait a sleeping crew is parked on.
    ``expires_at`` ``None`` means FOREVER."""

    wait_id: str
    crew_id: CrewId = attrs.field(converter=CrewId)
    kind: PendingWaitKind = attrs.field(converter=PendingWaitKind)
    started_at: datetime = attrs.field(validator=_aware)
    expires_at: datetime | None = attrs.field(default=None, validator=_aware)
    topic: str | None = None
    target_crew_id: CrewId | None = attrs.field(default=None, converter=_optional_crew)
    target_mailbox: MailboxAddress | None = attrs.field(default=None, converter=_optional_address)
    correlation_id: CorrelationId | None = attrs.field(default=None, converter=_optional_correlation)
    metadata_match: FrozenMap | None = attrs.field(default=None, converter=_optional_metadata)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.wait_id, str) or not self.wait_id:
            raise InvalidArgumentError("wait_id must be a non-empty string")
        required = {
            PendingWaitKind.ON_TOPIC: ("topic", self.topic),
            PendingWaitKind.ON_MAILBOX: ("target_mailbox", self.target_mailbox),
            PendingWaitKind.ON_REPLY: ("correlation_id", self.correlation_id),
        }[self.kind]
        if required[1] is None:
            raise InvalidArgumentError(f"a {self.kind.value} pending wait needs {required[0]}")


@attrs.frozen
class OutboxRecord:
    """One row of ``outbox``: a message a unit of work committed, to be dispatched.

    ``kind`` is ``"post"`` (to ``message.target_mailbox``) or ``"publish"``;
    ``last_value_key`` is set for a publish retained as a last value."""

    seq: int
    kind: str
    message: Message
    state: OutboxState = attrs.field(converter=OutboxState)
    created_at: datetime = attrs.field(validator=_aware)
    dispatched_at: datetime | None = None
    last_value_key: str | None = None
    error: str | None = None


SNAPSHOT_COLUMNS = tuple(a.name for a in attrs.fields(SnapshotRecord))
PENDING_WAIT_COLUMNS = tuple(a.name for a in attrs.fields(PendingWaitRecord))

converter.register_unstructure_hook(CrewState, lambda state: state.value)
converter.register_unstructure_hook(PendingWaitKind, lambda kind: kind.value)
converter.register_structure_hook(CrewState, lambda value, _: CrewState(value))
converter.register_structure_hook(PendingWaitKind, lambda value, _: PendingWaitKind(value))


def to_row(record: SnapshotRecord | PendingWaitRecord) -> tuple[Any, ...]:
    """The record's columns, in field order."""
    data = converter.unstructure(record)
    return tuple(data[name] for name in attrs.fields_dict(type(record)))


def snapshot_from_row(row: Sequence[Any]) -> SnapshotRecord:
    return converter.structure(dict(zip(SNAPSHOT_COLUMNS, row, strict=True)), SnapshotRecord)


def pending_wait_from_row(row: Sequence[Any]) -> PendingWaitRecord:
    return converter.structure(dict(zip(PENDING_WAIT_COLUMNS, row, strict=True)), PendingWaitRecord)
