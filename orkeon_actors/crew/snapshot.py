"""``CrewSnapshot`` (spec §8.1) and the one converter that owns its wire format.

``to_dict(snapshot)`` / ``from_dict(data)`` go through the snapshot format's converter
(:mod:`orkeon_actors.wire.snapshot`): snake_case keys, ids and addresses as strings,
datetimes in ISO 8601, payloads in base64, the ``OrchestrationState`` variants tagged
by ``mode`` and the ``PendingWaitKind`` variants by ``kind``. ``schema_version`` is
written on every snapshot; the loader upgrades an older one through the registered
migrators (§8.4) and refuses a version it does not know with :class:`SnapshotVersionError`.
From version 3 the text is compact: fields equal to their default are left out, and
``pending_waits`` too when it is the agents' pending waits (its usual value, a second
copy of them); both read back as they were.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

import attrs
from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union

from orkeon_actors.crew.mode_state import MODES, OrchestrationState
from orkeon_actors.crew.state import (
    AgentState,
    BudgetSnapshot,
    CrewFailure,
    CrewStatus,
    MailboxContent,
    OnMailbox,
    OnReply,
    OnTopic,
    PendingWait,
    PendingWaitKind,
)
from orkeon_actors.errors import EventHubError
from orkeon_actors.model.ids import CrewId
from orkeon_actors.wire.snapshot import dumps, snapshot_converter

__all__ = [
    "SCHEMA_VERSION",
    "CrewOutcome",
    "CrewSnapshot",
    "SnapshotVersionError",
    "agents_waits",
    "converter",
    "from_dict",
    "from_json",
    "register_migrator",
    "to_dict",
    "to_json",
]

SCHEMA_VERSION: Final = 3
"""The snapshot shape this release writes. Bump it on every shape change and register a
migrator from the previous version. 2: agents' ``cursors`` (``TopicCursorState``).
3: fields equal to their default are left out and the text has no insignificant
whitespace (:mod:`orkeon_actors.wire.snapshot`); ``schema_version`` is always written;
``pending_waits`` is left out when it is the agents' pending waits (:func:`agents_waits`)."""


class SnapshotVersionError(EventHubError):
    """A snapshot's ``schema_version`` is unknown (newer than this release, or older with
    no migrator path). Nothing was loaded."""


@attrs.frozen
class CrewSnapshot:
    """A whole crew as data (spec §8.1)."""

    id: CrewId
    name: str
    mode: str
    orchestration: OrchestrationState
    agents: tuple[AgentState, ...]
    budget: BudgetSnapshot
    mailboxes: tuple[MailboxContent, ...]
    pending_waits: tuple[PendingWait, ...]
    snapshot_at: datetime
    status: str = "waiting_for_message"
    result: str | None = None
    failure: str | None = None
    schema_version: int = SCHEMA_VERSION


converter = snapshot_converter()
"""The snapshot format's converter (:mod:`orkeon_actors.wire.snapshot`: datetimes as
``isoformat()``, payloads in base64), with the crew's tagged unions registered below."""


def _homogeneous_tuple(cls: Any) -> bool:
    args = typing.get_args(cls)
    return typing.get_origin(cls) is tuple and len(args) == 2 and args[1] is Ellipsis


def _structure_homogeneous_tuple(cls: Any) -> Callable[[Any, Any], tuple[Any, ...]]:
    """``tuple[X, ...]`` through ``X``'s own (generated) hook, fetched once: cattrs'
    generic tuple hook looks the element's hook up again for every snapshot."""
    element = typing.get_args(cls)[0]
    hook = converter.get_structure_hook(element)
    return lambda value, _: tuple([hook(item, element) for item in value])


def _optional(cls: Any) -> bool:
    args = typing.get_args(cls)
    return typing.get_origin(cls) in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args


def _structure_optional(cls: Any) -> Callable[[Any, Any], Any]:
    """``X | None`` through ``X``'s hook, fetched once (as above)."""
    [element] = [arg for arg in typing.get_args(cls) if arg is not type(None)]
    hook = converter.get_structure_hook(element)
    return lambda value, _: None if value is None else hook(value, element)


def _unstructure_homogeneous_tuple(cls: Any) -> Callable[[Any], list[Any]]:
    """``tuple[X, ...]`` to a list through ``X``'s own hook, fetched once (as above)."""
    hook = converter.get_unstructure_hook(typing.get_args(cls)[0])
    return lambda value: [hook(item) for item in value]


def _unstructure_optional(cls: Any) -> Callable[[Any], Any]:
    [element] = [arg for arg in typing.get_args(cls) if arg is not type(None)]
    hook = converter.get_unstructure_hook(element)
    return lambda value: None if value is None else hook(value)


converter.register_structure_hook_factory(_homogeneous_tuple, _structure_homogeneous_tuple)
converter.register_structure_hook_factory(_optional, _structure_optional)
converter.register_unstructure_hook_factory(_homogeneous_tuple, _unstructure_homogeneous_tuple)
converter.register_unstructure_hook_factory(_optional, _unstructure_optional)

_MODE_OF = {cls: mode for mode, cls in MODES.items()}
configure_tagged_union(OrchestrationState, converter, tag_generator=lambda cls: _MODE_OF[cls], tag_name="mode")
_KIND_OF = {OnTopic: "on_topic", OnMailbox: "on_mailbox", OnReply: "on_reply"}
configure_tagged_union(PendingWaitKind, converter, tag_generator=lambda cls: _KIND_OF[cls], tag_name="kind")

converter.register_unstructure_hook(
    CrewSnapshot,
    make_dict_unstructure_fn(
        CrewSnapshot, converter, _cattrs_omit_if_default=True, schema_version=override(omit_if_default=False)
    ),
)  # defaults left out, but never the version a reader needs first


Migrator = Callable[[dict[str, Any]], dict[str, Any]]
_MIGRATORS: dict[int, Migrator] = {}


def register_migrator(from_version: int) -> Callable[[Migrator], Migrator]:
    """Register ``fn(data) -> data`` upgrading an unstructured snapshot from
    ``from_version`` to ``from_version + 1`` (it must set the new ``schema_version``)."""

    def deco(fn: Migrator) -> Migrator:
        if from_version in _MIGRATORS:
            raise ValueError(f"a migrator from schema_version {from_version} is already registered")
        _MIGRATORS[from_version] = fn
        return fn

    return deco


def unregister_migrator(from_version: int) -> None:
    """Remove a migrator (tests)."""
    _MIGRATORS.pop(from_version, None)


@register_migrator(1)
def _add_cursors(data: dict[str, Any]) -> dict[str, Any]:
    """1 -> 2: agents gained ``cursors``; a version-1 crew had none open (its
    ``wait_for_event`` waits were one-shot)."""
    agents = [{**agent, "cursors": []} for agent in data.get("agents", [])]
    return {**data, "agents": agents, "schema_version": 2}


@register_migrator(2)
def _compact(data: dict[str, Any]) -> dict[str, Any]:
    """2 -> 3: only the text changed (defaults left out, no whitespace); a version-2
    body, every field written, structures as it is."""
    return {**data, "schema_version": 3}


def to_dict(snapshot: CrewSnapshot) -> dict[str, Any]:
    """The snapshot as JSON values."""
    data: dict[str, Any] = converter.unstructure(snapshot)
    if snapshot.pending_waits == agents_waits(snapshot.agents):
        del data["pending_waits"]  # a second copy of the agents' waits: read back from them
    return data


def agents_waits(agents: tuple[AgentState, ...]) -> tuple[PendingWait, ...]:
    """The waits of the agents parked on a tool call, in agent order: a crew's
    ``pending_waits`` as the crew actor takes them. The text leaves ``pending_waits``
    out when it is exactly this, and :func:`from_dict` takes them from the agents then."""
    return tuple(a.pending.wait for a in agents if a.pending is not None and a.pending.wait is not None)


def _with_agents_waits(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``pending_waits`` taken from its agents' pending calls when absent."""
    if "pending_waits" in data:
        return data
    waits = []
    for agent in data.get("agents", ()):
        pending = agent.get("pending") if isinstance(agent, dict) else None
        if isinstance(pending, dict) and pending.get("wait") is not None:
            waits.append(pending["wait"])
    return {**data, "pending_waits": waits}


def from_dict(data: dict[str, Any]) -> CrewSnapshot:
    """Load a snapshot, migrating it up to :data:`SCHEMA_VERSION`.

    Raises :class:`SnapshotVersionError` for a version newer than this release or one
    with no migrator path, and cattrs' ``ClassValidationError`` for a malformed body."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SnapshotVersionError(f"snapshot has no integer schema_version (got {version!r})")
    while version != SCHEMA_VERSION:
        if version > SCHEMA_VERSION:
            raise SnapshotVersionError(
                f"snapshot schema_version {version} is newer than this release knows ({SCHEMA_VERSION}); "
                "upgrade orkeon_actors to load it"
            )
        migrator = _MIGRATORS.get(version)
        if migrator is None:
            raise SnapshotVersionError(
                f"no migrator from snapshot schema_version {version} (this release writes {SCHEMA_VERSION}); "
                f"register one with @register_migrator({version})"
            )
        data = migrator(dict(data))
        new_version = data.get("schema_version")
        if new_version != version + 1:
            raise SnapshotVersionError(
                f"the migrator from schema_version {version} produced schema_version {new_version!r}, "
                f"expected {version + 1}"
            )
        version = new_version
    return converter.structure(_with_agents_waits(data), CrewSnapshot)


def to_json(snapshot: CrewSnapshot) -> str:
    """The snapshot's stored text (:func:`orkeon_actors.wire.snapshot.dumps`)."""
    return dumps(to_dict(snapshot))


def from_json(text: str) -> CrewSnapshot:
    return from_dict(json.loads(text))


@attrs.frozen
class CrewOutcome:
    """What a finished crew left behind: its final ``status`` (``COMPLETED`` or
    ``FAILED``), its ``result`` (a completed crew's answer), its ``failure`` (why a
    failed one failed) and, unless the supervisor keeps no outcomes, its final state as
    the snapshot codec's JSON, decoded on demand by :meth:`final_snapshot` (a string: an
    outcome kept in memory costs the garbage collector nothing to walk)."""

    status: CrewStatus
    result: str | None = None
    failure: CrewFailure | None = None
    final_json: str | None = attrs.field(default=None, repr=False)

    def final_snapshot(self) -> CrewSnapshot | None:
        """The crew's final state (its agents' conversations, budgets, orchestration)."""
        return None if self.final_json is None else from_json(self.final_json)
