"""Tool definitions in the shape each LLM API (and MCP) takes, and back.

A definition starts *canonical*: ``{"name", "description", "input_schema"}`` with a JSON
Schema (Draft 2020-12) input, plus ``"output_schema"`` for the seven hub tools. This is
also the ``"anthropic"`` style, the shape the Messages API takes. :func:`render` turns a
canonical definition into one of the styles:

* ``"anthropic"``: ``{"name", "description", "input_schema"}`` (Anthropic Messages API).
* ``"openai"``: ``{"type": "function", "function": {"name", "description", "parameters"}}``
  (Chat Completions, the schema as is).
* ``"openai-strict"``: the same with ``"strict": true`` and the schema *lowered* to the
  subset OpenAI's strict mode accepts (Structured Outputs, "Supported schemas"): every
  property ``required``, an optional one nullable instead, ``additionalProperties: false``
  on every object, only the supported keywords.
* ``"gemini"``: a Gemini ``FunctionDeclaration`` ``{"name", "description", "parameters"}``
  whose schema is the OpenAPI 3.0 subset Gemini documents: one ``type`` per schema
  (``nullable: true`` instead of type arrays), no ``additionalProperties``, ``enum`` only
  on strings, only the supported keywords.
* ``"mcp"``: an MCP ``Tool`` ``{"name", "description", "inputSchema"[, "outputSchema"]}``.

Lowering cannot express everything: strict mode and Gemini have no schema for "any JSON
value" (a tool's untyped ``payload``) nor for an open string map (``metadata``). Such a
property is declared as a *JSON text* string instead (its description says so), and
:func:`canonical_arguments` turns what the model sent back into the canonical arguments:
JSON text decoded, the ``null`` a model must send for an omitted optional property
dropped. Arguments already canonical pass through unchanged, so applying it to the
output of a non-lowered style is harmless.

Failure modes: an unknown style raises ``ValueError``; a tool name a provider refuses
raises :class:`~orkeon_actors.errors.ToolDefinitionError` naming the rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

from orkeon_actors.errors import InvalidArgumentError, ToolDefinitionError

__all__ = [
    "STYLES",
    "DefinitionStyle",
    "canonical_arguments",
    "gemini_schema",
    "render",
    "strict_schema",
]

DefinitionStyle = Literal["anthropic", "openai", "openai-strict", "gemini", "mcp"]
STYLES: Final[tuple[str, ...]] = get_args(DefinitionStyle)

# Tool-name rules as each provider documents them.
_NAME_RULES: Final[dict[str, tuple[re.Pattern[str], str]]] = {
    "anthropic": (re.compile(r"^[a-zA-Z0-9_-]{1,64}$"), "1-64 letters, digits, '_' or '-'"),
    "openai": (re.compile(r"^[a-zA-Z0-9_-]{1,64}$"), "1-64 letters, digits, '_' or '-'"),
    "openai-strict": (re.compile(r"^[a-zA-Z0-9_-]{1,64}$"), "1-64 letters, digits, '_' or '-'"),
    "gemini": (
        re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$"),
        "a letter or '_' first, then letters, digits, '_', '.', ':' or '-', at most 64 in all",
    ),
    "mcp": (re.compile(r"^[A-Za-z0-9_.-]{1,128}$"), "1-128 letters, digits, '_', '.' or '-'"),
}

_JSON_TEXT: Final = "x-orkeon-json-text"
"""Marks a lowered property that carries JSON text (stripped from what is rendered)."""

_STRICT_KEYWORDS: Final = frozenset(
    {
        "type", "description", "properties", "required", "additionalProperties", "items", "enum",
        "anyOf", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip
_STRICT_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_GEMINI_KEYWORDS: Final = frozenset(
    {
        "type", "format", "description", "nullable", "enum", "maxItems", "minItems", "properties",
        "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "anyOf",
        "items", "minimum", "maximum",
    }
)  # fmt: skip
_GEMINI_FORMATS: Final = frozenset({"date-time", "enum", "float", "double", "int32", "int64"})


def render(definition: Mapping[str, Any], style: DefinitionStyle) -> dict[str, Any]:
    """``definition`` (canonical) in ``style``; the input is not modified."""
    if style not in STYLES:
        raise InvalidArgumentError(f"unknown definition style {style!r}; use one of {', '.join(map(repr, STYLES))}")
    name = str(definition["name"])
    pattern, rule = _NAME_RULES[style]
    if not pattern.match(name):
        raise ToolDefinitionError(
            f"tool name {name!r} is not valid in the {style} style (it must be {rule}); rename the tool"
        )
    description = str(definition.get("description", ""))
    schema: dict[str, Any] = dict(definition.get("input_schema") or {"type": "object"})
    if style == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    if style == "openai":
        return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}
    if style == "openai-strict":
        function = {"name": name, "description": description, "parameters": strict_schema(schema), "strict": True}
        return {"type": "function", "function": function}
    if style == "gemini":
        return {"name": name, "description": description, "parameters": gemini_schema(schema)}
    tool: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema}
    if "output_schema" in definition:
        tool["outputSchema"] = dict(definition["output_schema"])
    return tool


# -- lowering ---------------------------------------------------------------------------


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` lowered to OpenAI's strict subset (see the module docstring)."""
    lowered: dict[str, Any] = _strip_marks(_lower(schema, "openai-strict", optional=False))
    return lowered


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` lowered to Gemini's OpenAPI 3.0 subset (see the module docstring)."""
    lowered: dict[str, Any] = _strip_marks(_lower(schema, "gemini", optional=False))
    return lowered


def _lower(schema: Mapping[str, Any], style: str, *, optional: bool) -> dict[str, Any]:
    """One schema node, lowered. ``optional``: the node is a property the canonical
    schema lets the caller omit, so the lowered one must accept ``null``."""
    types, nullable = _types(schema)
    description = schema.get("description")
    if _needs_json_text(schema, types):
        text = "Give it as JSON text (a JSON document encoded in this string)."
        lowered: dict[str, Any] = {
            "type": "string",
            "description": f"{description} {text}" if description else text,
            _JSON_TEXT: True,
        }
        return _with_null(lowered, style, nullable or optional)
    if "anyOf" in schema:
        branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
        nullable = nullable or len(branches) != len(schema["anyOf"])
        if len(branches) == 1:
            merged = {**branches[0], **({"description": description} if description else {})}
            return _lower(merged, style, optional=optional or nullable)
        lowered = {"anyOf": [_lower(b, style, optional=False) for b in branches]}
        if description:
            lowered["description"] = description
        if nullable or optional:
            if style == "openai-strict":
                lowered["anyOf"].append({"type": "null"})
            else:
                lowered["nullable"] = True
        return lowered
    (kind,) = types
    lowered = {"type": kind}
    keywords = _STRICT_KEYWORDS if style == "openai-strict" else _GEMINI_KEYWORDS
    formats = _STRICT_FORMATS if style == "openai-strict" else _GEMINI_FORMATS
    for key, value in schema.items():
        if key in ("type", "properties", "required", "additionalProperties", "items", "anyOf"):
            continue
        if key == "const":
            lowered["enum"] = [value]
        elif key == "enum":
            lowered["enum"] = [v for v in value if v is not None]
        elif key == "format":
            if value in formats:
                lowered["format"] = value
        elif key in keywords:
            lowered[key] = value
    if "enum" in lowered and style == "gemini" and kind != "string":
        del lowered["enum"]  # Gemini: enum only on STRING
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        lowered["properties"] = {
            name: _lower(prop, style, optional=name not in required) for name, prop in properties.items()
        }
        if style == "openai-strict":
            lowered["required"] = list(properties)
            lowered["additionalProperties"] = False
        elif required:
            lowered["required"] = [name for name in properties if name in required]
    elif kind == "array" and "items" in schema:
        lowered["items"] = _lower(schema["items"], style, optional=False)
    return _with_null(lowered, style, nullable or optional)


def _types(schema: Mapping[str, Any]) -> tuple[tuple[str, ...], bool]:
    kind = schema.get("type")
    kinds = (kind,) if isinstance(kind, str) else tuple(kind or ())
    return tuple(k for k in kinds if k != "null"), "null" in kinds


def _needs_json_text(schema: Mapping[str, Any], types: tuple[str, ...]) -> bool:
    """An untyped value, a multi-type value, or an object that is an open map."""
    if "anyOf" in schema:
        return False
    if len(types) != 1:
        return True
    if types == ("object",):
        return not schema.get("properties") or schema.get("additionalProperties", False) is not False
    return False


def _with_null(schema: dict[str, Any], style: str, nullable: bool) -> dict[str, Any]:
    if not nullable:
        return schema
    if style == "gemini":
        return {**schema, "nullable": True}
    schema = dict(schema)
    schema["type"] = [schema["type"], "null"]
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _strip_marks(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_marks(v) for k, v in schema.items() if k != _JSON_TEXT}
    if isinstance(schema, list):
        return [_strip_marks(v) for v in schema]
    return schema


# -- raising arguments back -------------------------------------------------------------


def canonical_arguments(schema: Mapping[str, Any], arguments: Any) -> Any:
    """What a model sent for a lowered ``schema`` (strict or Gemini), as the canonical
    ``schema`` expects it: JSON-text properties decoded, ``null`` for a property the
    canonical schema lets the caller omit dropped. Text that is not JSON is kept as the
    string it is (the tool's own validation then says what is wrong, or takes it as a
    string payload). Anything that does not fit ``schema`` is returned unchanged."""
    types, _nullable = _types(schema)
    if _needs_json_text(schema, types):
        if isinstance(arguments, str):
            try:
                return json.loads(arguments)
            except ValueError:
                return arguments
        return arguments
    if "anyOf" in schema:
        branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
        if arguments is not None and len(branches) == 1:
            return canonical_arguments(branches[0], arguments)
        return arguments
    if types == ("object",) and isinstance(arguments, Mapping):
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        out: dict[str, Any] = {}
        for name, value in arguments.items():
            if name not in properties:
                out[name] = value  # the tool's validation refuses it by name
            elif value is None and name not in required:
                continue
            else:
                out[name] = canonical_arguments(properties[name], value)
        return out
    if types == ("array",) and isinstance(arguments, list) and "items" in schema:
        return [canonical_arguments(schema["items"], item) for item in arguments]
    return arguments
