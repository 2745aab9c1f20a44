"""The base converter every wire format starts from.

:func:`base_converter` returns a new :class:`cattrs.Converter` with the hooks that are
the same in every format, registered here once:

* ids (``CrewId`` with ``CrewId.SYSTEM``, ``AgentId``, ``MessageId``, ``CorrelationId``)
  and ``MailboxAddress`` are their canonical strings; structuring validates them
  (``InvalidIdError`` / ``InvalidAddressError``), except where a format says its text is
  trusted (:func:`trust_ulids`);
* a ``FrozenMap`` (message metadata) is a JSON object of strings, validated on the way
  in (``InvalidArgumentError``);
* a ``datetime`` follows the format's :class:`DatetimeRule`, the one thing every format
  states for itself.

A format module (:mod:`~orkeon_actors.wire.snapshot`, :mod:`~orkeon_actors.wire.store_row`,
:mod:`~orkeon_actors.wire.tool_json`, :mod:`~orkeon_actors.wire.amqp`) adds what is its
own in a ``configure_*`` function; the layer that owns a format's records (the crew's
snapshot, the store's rows, the tools' DTOs) registers those on top.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import attrs
import cattrs

from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import FrozenMap, freeze_metadata

__all__ = ["ID_TYPES", "DatetimeRule", "base_converter", "json_kind", "structure_crew_id", "trust_ulids"]

ID_TYPES: tuple[type[str], ...] = (CrewId, AgentId, MessageId, CorrelationId)


@attrs.frozen
class DatetimeRule:
    """How one format writes and reads a ``datetime``: ``format(value) -> str`` and
    ``parse(text) -> datetime`` (which raises ``TypeError`` / ``ValueError`` for text the
    format refuses). ``name`` says the rule in words (it is in every error)."""

    name: str
    format: Callable[[datetime], str]
    parse: Callable[[Any], datetime]


def json_kind(value: object) -> str:
    """The JSON name of ``value``'s type, for error messages (``string``, ``integer``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def structure_crew_id(value: object, _: type = CrewId) -> CrewId:
    """A crew id from its string (``_system`` is ``CrewId.SYSTEM``, which no user id may be)."""
    if value == CrewId.SYSTEM:
        return CrewId.SYSTEM
    return CrewId(value)  # type: ignore[arg-type]


def _structure_metadata(value: object, _: type) -> FrozenMap:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object of strings, got {json_kind(value)}")
    return freeze_metadata(value)


def base_converter(datetimes: DatetimeRule, **options: Any) -> cattrs.Converter:
    """A new converter with the shared hooks (module docstring) and ``datetimes`` as its
    datetime rule; ``options`` go to :class:`cattrs.Converter` (``forbid_extra_keys``...)."""
    converter = cattrs.Converter(**options)
    for id_type in (AgentId, MessageId, CorrelationId):
        converter.register_structure_hook(id_type, lambda value, cls: cls(value))
    converter.register_structure_hook(CrewId, structure_crew_id)
    for any_id in ID_TYPES:
        converter.register_unstructure_hook(any_id, str)
    converter.register_structure_hook(MailboxAddress, lambda value, _: MailboxAddress.parse(value))
    converter.register_unstructure_hook(MailboxAddress, str)
    converter.register_structure_hook(FrozenMap, _structure_metadata)
    converter.register_unstructure_hook(FrozenMap, dict)
    converter.register_structure_hook(datetime, lambda value, _: datetimes.parse(value))
    converter.register_unstructure_hook(datetime, datetimes.format)
    return converter


def trust_ulids(converter: cattrs.Converter) -> None:
    """Structure ``MessageId`` / ``CorrelationId`` without validating them: for a format
    whose text only this package writes (a store row it reads back)."""
    for id_type in (MessageId, CorrelationId):
        converter.register_structure_hook(id_type, lambda value, cls: cls.unchecked(value))
