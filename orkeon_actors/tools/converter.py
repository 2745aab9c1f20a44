"""THE converter of the tools' JSON wire format (defined by :mod:`orkeon_actors.wire.tool_json`).

One :class:`cattrs.Converter` turns tool arguments (plain JSON values) into request DTOs
and response DTOs back into plain JSON values. Its rules:

* snake_case names, exactly the DTO field names; unknown fields are refused;
* ``datetime`` is ISO 8601 in UTC with a ``Z`` suffix and microseconds
  (``2026-01-01T12:00:00.000000Z``); an aware datetime in another zone is converted;
* ids (``CrewId``, ``AgentId``, ``MessageId``, ``CorrelationId``) and ``MailboxAddress``
  are their canonical strings;
* metadata maps are JSON objects of strings;
* a :class:`~orkeon_actors.model.message.Message` is its
  :class:`~orkeon_actors.tools.dto.MessageEnvelope` (every §6.1 field, payload decoded);
* ``receive_message`` / ``wait_for_event`` results omit the fields that do not apply
  (``message`` on a timeout, ``metadata`` on a message, ``missed`` when zero).

:func:`structure_request` is the entry point for tool arguments: it refuses bad input
with a :class:`~orkeon_actors.errors.ToolValidationError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_unstructure_fn

from orkeon_actors.errors import EventHubError, ToolValidationError
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.tools.dto import MessageEnvelope, ReceiveMessageResponse, WaitForEventResponse
from orkeon_actors.tools.validation import field_names, json_kind
from orkeon_actors.wire.tool_json import format_datetime, parse_datetime, tool_json_converter

__all__ = ["converter", "format_datetime", "parse_datetime", "structure_request", "unstructure"]

T = TypeVar("T")

converter = tool_json_converter(MessageEnvelope)
"""The one converter of the tools' wire format (:mod:`orkeon_actors.wire.tool_json`),
with the tools' strict input rules registered on top."""


def _strict(kind: type, name: str) -> Any:
    def structure(value: object, _: type) -> object:
        if type(value) is bool and kind is not bool:
            raise TypeError(f"expected {name}, got boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise TypeError(f"expected {name}, got {json_kind(value)}")
        return value

    return structure


def _string_type(kind: type[T]) -> Any:
    def structure(value: object, _: type) -> T:
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {json_kind(value)}")
        return kind(value)  # type: ignore[call-arg]

    return structure


for _kind, _name in ((str, "a string"), (int, "an integer"), (bool, "a boolean"), (float, "a number")):
    converter.register_structure_hook(_kind, _strict(_kind, _name))

for _id in (CrewId, AgentId, MessageId, CorrelationId):
    converter.register_structure_hook(_id, _string_type(_id))
for _result in (ReceiveMessageResponse, WaitForEventResponse):
    converter.register_unstructure_hook(
        _result, make_dict_unstructure_fn(_result, converter, _cattrs_omit_if_default=True)
    )


def unstructure(value: object) -> Any:
    """``value`` (a DTO, a Message...) as plain JSON values."""
    return converter.unstructure(value)


def structure_request(arguments: object, cls: type[T]) -> T:
    """Build the request DTO ``cls`` from JSON ``arguments``.

    Raises :class:`ToolValidationError` naming the field for: arguments that are not a
    JSON object, an unknown field, a missing required field, a wrong type, or a value a
    field's rule refuses. Errors are reported one at a time, unknown fields first, then
    in field order, so that a model fixing them one by one converges.
    """
    if isinstance(arguments, cls):
        return arguments
    if not isinstance(arguments, Mapping):
        raise ToolValidationError(
            f"the arguments must be a JSON object with the fields {', '.join(field_names(cls))}, "
            f"got {json_kind(arguments)}"
        )
    try:
        return converter.structure(dict(arguments), cls)
    except ClassValidationError as exc:
        raise _first_error(exc, cls) from None


def _first_error(exc: ClassValidationError, cls: type) -> EventHubError:
    names = field_names(cls)
    hints: Mapping[str, str] = getattr(cls, "_field_hints", {})
    with_notes, without_notes = exc.group_exceptions()
    for inner in without_notes:
        if isinstance(inner, EventHubError):
            return inner  # a field rule refused a value: it already names the field
        if not isinstance(inner, ForbiddenExtraKeysError):
            raise exc  # not a validation failure: a defect must surface as itself
        unknown = sorted(inner.extra_fields)[0]
        if unknown in hints:
            return ToolValidationError(hints[unknown], field=unknown)
        return ToolValidationError(
            f"unknown field {unknown!r}; the accepted fields are {', '.join(names)}", field=unknown
        )
    ordered = sorted(with_notes, key=lambda pair: names.index(pair[1].name) if pair[1].name in names else len(names))
    for inner, note in ordered:
        if isinstance(inner, ToolValidationError):
            return inner
        if isinstance(inner, KeyError):
            return ToolValidationError(f"missing required field {note.name!r}", field=note.name)
        return ToolValidationError(f"{note.name}: {inner}", field=note.name)
    return ToolValidationError(f"invalid arguments: {exc}")
