"""JSON Schema (Draft 2020-12) of the tool DTOs, generated from the attrs classes.

The schema of a DTO is derived from its fields: the annotation gives the type, the
field's ``metadata`` (see :func:`orkeon_actors.tools.dto.doc`) gives the description and
any extra keywords (``pattern``, ``minimum``, ``const``...). A field without a default is
``required``; an optional field (``X | None``) also accepts ``null``; every object has
``additionalProperties: false``. Nested DTOs and messages are inlined, so each schema is
self-contained, as function-calling APIs expect.

The schema describes the same rules the converter enforces; the converter stays the
authority (for instance a topic with a trailing newline passes the ``pattern`` keyword,
whose ``$`` is lenient, but not the converter).
"""

from __future__ import annotations

import types
import typing
from datetime import datetime
from typing import Any, Final, Union

import attrs

from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import FrozenMap, Message
from orkeon_actors.tools.dto import DESCRIPTION, SCHEMA, MessageEnvelope

__all__ = ["DIALECT", "MAILBOX_PATTERN", "NAME_PATTERN", "ULID_PATTERN", "json_schema"]

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect of every schema built here (not embedded: some LLM APIs
refuse ``$schema``; MCP assumes 2020-12 when it is absent)."""

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_TOPIC = r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*"
NAME_PATTERN: Final = rf"^{_NAME}$"
ULID_PATTERN: Final = r"^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$"
MAILBOX_PATTERN: Final = (
    rf"^(?:agent://{_NAME}/{_NAME}|crew://{_NAME}|topic://{_TOPIC}|client://{_NAME}|a2a://{_NAME})$"
)

_LEAVES: Final[dict[Any, dict[str, Any]]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    Any: {},
    FrozenMap: {"type": "object", "additionalProperties": {"type": "string"}},
    CrewId: {"type": "string", "pattern": NAME_PATTERN},
    AgentId: {"type": "string", "pattern": NAME_PATTERN},
    MessageId: {"type": "string", "pattern": ULID_PATTERN},
    CorrelationId: {"type": "string", "pattern": ULID_PATTERN},
    MailboxAddress: {"type": "string", "pattern": MAILBOX_PATTERN},
    datetime: {"type": "string", "format": "date-time"},
}


def json_schema(cls: type) -> dict[str, Any]:
    """The object schema of the attrs class ``cls``. Raises ``TypeError`` for a field
    type that has no JSON form here (a bug in a DTO, caught by the schema tests)."""
    attrs.resolve_types(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        properties[field.name] = _field_schema(field)
        if field.default is attrs.NOTHING:
            required.append(field.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _field_schema(field: attrs.Attribute[Any]) -> dict[str, Any]:
    inner, nullable = _unwrap_optional(field.type)
    schema = dict(_type_schema(inner))
    schema.update(field.metadata.get(SCHEMA, {}))
    if nullable:
        schema = _nullable(schema)
    description = field.metadata.get(DESCRIPTION)
    return {"description": description, **schema} if description else schema


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) != len(typing.get_args(annotation))
        raise TypeError(f"unions other than Optional have no tool schema: {annotation!r}")
    return annotation, False


def _type_schema(annotation: Any) -> dict[str, Any]:
    if annotation in _LEAVES:
        return _LEAVES[annotation]
    if annotation is Message:
        return json_schema(MessageEnvelope)
    if isinstance(annotation, type) and attrs.has(annotation):
        return json_schema(annotation)
    raise TypeError(f"no JSON Schema for field type {annotation!r}")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` widened to also accept ``null``."""
    if not schema:
        return schema  # any JSON value already includes null
    schema = dict(schema)
    if "const" in schema:
        schema["enum"] = [schema.pop("const")]
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
        return schema
    return {"anyOf": [schema, {"type": "null"}]}
