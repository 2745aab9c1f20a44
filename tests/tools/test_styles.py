"""The definition styles, each checked against what its provider documents.

* Anthropic Messages API, "Tool use": a tool is ``{name, description, input_schema}``,
  the name ``^[a-zA-Z0-9_-]{1,64}$``, ``input_schema`` a JSON Schema of ``type: object``.
* OpenAI Chat Completions, "Function calling": ``{type: function, function: {name,
  description, parameters}}``, the same name rule.
* OpenAI Structured Outputs, "Supported schemas" (strict mode): the root an object (not
  ``anyOf``); every object ``additionalProperties: false`` and every property in
  ``required``; optional fields as a union with ``null``; only the supported keywords and
  string formats; at most 10 levels of nesting, 5000 properties, 1000 enum values.
* Gemini API, ``FunctionDeclaration`` and ``Schema`` (a subset of the OpenAPI 3.0 schema
  object): one ``type`` per schema from the ``Type`` enum, ``nullable`` instead of type
  arrays, only the documented fields, ``enum`` only on strings, an ``OBJECT`` with
  non-empty ``properties``, ``required`` naming existing properties; the name a letter or
  ``_`` then up to 63 of ``[a-zA-Z0-9_.:-]``.
* MCP (2025-06-18), ``Tool``: ``name``, ``inputSchema`` (and ``outputSchema``) a JSON
  Schema object of ``type: object``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import anthropic.types
import jsonschema
import openai.types.chat
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.errors import InvalidArgumentError, ToolDefinitionError
from orkeon_actors.tools import STYLES, TOOL_SPECS, canonical_arguments, render, tool_definitions
from orkeon_actors.tools.definitions import canonical_definition

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _walk(schema: Any, depth: int = 0) -> list[tuple[dict[str, Any], int]]:
    """Every schema node under ``schema`` with its object-nesting depth."""
    nodes = [(schema, depth)]
    for sub in schema.get("properties", {}).values():
        nodes += _walk(sub, depth + 1)
    if "items" in schema:
        nodes += _walk(schema["items"], depth + 1)
    for branch in schema.get("anyOf", []):
        nodes += _walk(branch, depth)
    return nodes


def test_anthropic_style_is_the_messages_api_tool() -> None:
    adapter = pydantic.TypeAdapter(anthropic.types.ToolParam)
    for definition in tool_definitions("anthropic"):
        assert set(definition) == {"name", "description", "input_schema"}
        assert _NAME.match(definition["name"])
        adapter.validate_python(definition)
        assert definition["input_schema"]["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(definition["input_schema"])
    assert tool_definitions() == tool_definitions("anthropic")  # still the default


def test_openai_style_is_a_chat_completions_function_tool() -> None:
    adapter = pydantic.TypeAdapter(openai.types.chat.ChatCompletionFunctionToolParam)
    for definition, spec in zip(tool_definitions("openai"), TOOL_SPECS, strict=True):
        assert set(definition) == {"type", "function"} and definition["type"] == "function"
        assert set(definition["function"]) == {"name", "description", "parameters"}
        assert _NAME.match(definition["function"]["name"])
        adapter.validate_python(definition)
        assert definition["function"]["parameters"] == spec.input_schema  # not lowered


_STRICT_KEYWORDS = {
    "type", "description", "properties", "required", "additionalProperties", "items", "enum",
    "anyOf", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minItems", "maxItems",
}  # fmt: skip
_STRICT_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
_STRICT_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def _check_openai_strict(parameters: dict[str, Any]) -> None:
    assert parameters["type"] == "object" and "anyOf" not in parameters
    nodes = _walk(parameters)
    assert max(depth for _, depth in nodes) <= 10
    assert sum(len(n.get("properties", {})) for n, _ in nodes) <= 5000
    for node, _ in nodes:
        assert set(node) <= _STRICT_KEYWORDS, set(node) - _STRICT_KEYWORDS
        assert "type" in node or "anyOf" in node, f"untyped schema {node}"
        kinds = [node["type"]] if isinstance(node.get("type"), str) else node.get("type", [])
        assert set(kinds) <= _STRICT_TYPES
        if "format" in node:
            assert node["format"] in _STRICT_FORMATS
        if "enum" in node:
            assert len(node["enum"]) <= 1000
        if "object" in kinds:
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
    jsonschema.Draft202012Validator.check_schema(parameters)


def test_openai_strict_style_meets_the_strict_mode_rules() -> None:
    adapter = pydantic.TypeAdapter(openai.types.chat.ChatCompletionFunctionToolParam)
    for definition, spec in zip(tool_definitions("openai-strict"), TOOL_SPECS, strict=True):
        adapter.validate_python(definition)
        function = definition["function"]
        assert function["strict"] is True and _NAME.match(function["name"])
        _check_openai_strict(function["parameters"])
        canonical = spec.input_schema
        for name, prop in function["parameters"]["properties"].items():
            if name not in canonical.get("required", []):  # optional: nullable instead
                assert "null" in prop["type"], (spec.name, name)


def test_openai_strict_has_no_untyped_payload() -> None:
    publish = tool_definitions("openai-strict")[0]["function"]["parameters"]["properties"]
    assert publish["payload"]["type"] == "string" and "JSON text" in publish["payload"]["description"]
    assert publish["metadata"]["type"] == ["string", "null"]  # an open map is JSON text too


_GEMINI_FIELDS = {
    "type", "format", "description", "nullable", "enum", "maxItems", "minItems", "properties",
    "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "anyOf",
    "items", "minimum", "maximum",
}  # fmt: skip
_GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object"}


def _check_gemini(parameters: dict[str, Any]) -> None:
    for node, _ in _walk(parameters):
        assert set(node) <= _GEMINI_FIELDS, set(node) - _GEMINI_FIELDS
        if "anyOf" in node:
            continue
        assert isinstance(node["type"], str) and node["type"] in _GEMINI_TYPES, node
        if "enum" in node:
            assert node["type"] == "string" and all(isinstance(v, str) for v in node["enum"])
        if node["type"] == "object":
            assert node["properties"], "Gemini refuses an OBJECT without properties"
            assert set(node.get("required", [])) <= set(node["properties"])
        if "nullable" in node:
            assert node["nullable"] is True


def test_gemini_style_is_a_function_declaration_without_type_arrays() -> None:
    gemini_name = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")
    for definition in tool_definitions("gemini"):
        assert set(definition) == {"name", "description", "parameters"}
        assert gemini_name.match(definition["name"])
        _check_gemini(definition["parameters"])
        assert all(not isinstance(n.get("type"), list) for n, _ in _walk(definition["parameters"]))


def test_mcp_style_is_an_mcp_tool() -> None:
    mcp_name = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
    for definition, spec in zip(tool_definitions("mcp"), TOOL_SPECS, strict=True):
        assert set(definition) == {"name", "description", "inputSchema", "outputSchema"}
        assert mcp_name.match(definition["name"])
        for schema in (definition["inputSchema"], definition["outputSchema"]):
            assert schema["type"] == "object"
            jsonschema.Draft202012Validator.check_schema(schema)
        assert definition["inputSchema"] == spec.input_schema
        assert definition["outputSchema"] == spec.output_schema


def test_unknown_style_and_refused_names() -> None:
    with pytest.raises(InvalidArgumentError, match="openai-strict"):  # typed, and a ValueError
        tool_definitions("bogus")  # type: ignore[arg-type]
    tool = {"name": "look up", "description": "d", "input_schema": {"type": "object"}}
    for style in STYLES:
        with pytest.raises(ToolDefinitionError, match="rename the tool"):
            render(tool, style)  # type: ignore[arg-type]
    dotted = {"name": "crm.lookup", "description": "d", "input_schema": {"type": "object"}}
    assert render(dotted, "gemini")["name"] == "crm.lookup"
    with pytest.raises(ToolDefinitionError):
        render(dotted, "openai")


def test_a_user_tool_schema_lowers_too() -> None:
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1},
            "filters": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
            "mode": {"const": "fast", "type": "string"},
            "extra": {},
        },
        "required": ["query"],
    }
    tool = {"name": "search", "description": "Search.", "input_schema": schema}
    strict = render(tool, "openai-strict")["function"]["parameters"]
    _check_openai_strict(strict)
    assert strict["properties"]["mode"]["enum"] == ["fast", None]
    _check_gemini(render(tool, "gemini")["parameters"])
    sent = {"query": "x", "limit": None, "filters": [{"k": None}], "mode": "fast", "extra": '{"a": [1]}'}
    assert canonical_arguments(schema, sent) == {"query": "x", "filters": [{}], "mode": "fast", "extra": {"a": [1]}}


# -- the arguments of a lowered style come back canonical --------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_TOPIC = st.from_regex(r"\A[a-z]{1,5}(\.[a-z]{1,5}){0,2}\Z")
_HEADERS = st.dictionaries(st.text("abc", min_size=1, max_size=3), st.text(max_size=4), max_size=3)

_PUBLISH = st.fixed_dictionaries(
    {"topic": _TOPIC, "payload": _JSON},
    optional={
        "target_crew_id": st.from_regex(r"\A[a-z][a-z0-9]{0,6}\Z"),
        "metadata": _HEADERS,
        "retain_as_last_value": st.booleans(),
        "last_value_key": st.text("xyz", min_size=1, max_size=4),
    },
)


def _as_lowered(canonical: Mapping[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    """What a model sends in a lowered style: every property, null when omitted, JSON
    text where the lowered schema asks for a string the canonical one does not."""
    sent: dict[str, Any] = {}
    for name, prop in properties.items():
        if name not in canonical:
            sent[name] = None
        elif "JSON text" in prop.get("description", ""):
            sent[name] = json.dumps(canonical[name])
        else:
            sent[name] = canonical[name]
    return sent


@settings(max_examples=150, deadline=None)
@given(_PUBLISH)
def test_strict_arguments_validate_and_come_back_exactly(arguments: dict[str, Any]) -> None:
    spec = TOOL_SPECS[0]
    canonical_schema = canonical_definition(spec)["input_schema"]
    strict = tool_definitions("openai-strict")[0]["function"]["parameters"]
    sent = _as_lowered(arguments, strict["properties"])
    jsonschema.Draft202012Validator(strict).validate(sent)
    back = canonical_arguments(canonical_schema, sent)
    assert back == arguments
    jsonschema.Draft202012Validator(canonical_schema).validate(back)


@settings(max_examples=100, deadline=None)
@given(_PUBLISH)
def test_gemini_arguments_come_back_exactly(arguments: dict[str, Any]) -> None:
    gemini = tool_definitions("gemini")[0]["parameters"]
    sent = {k: v for k, v in _as_lowered(arguments, gemini["properties"]).items() if v is not None}
    assert canonical_arguments(TOOL_SPECS[0].input_schema, sent) == arguments


def test_canonical_arguments_keep_what_they_cannot_read() -> None:
    schema = TOOL_SPECS[0].input_schema
    assert canonical_arguments(schema, {"topic": "t", "payload": "not json"}) == {"topic": "t", "payload": "not json"}
    assert canonical_arguments(schema, {"topic": "t", "payload": 1, "bogus": 2})["bogus"] == 2
    assert canonical_arguments(schema, ["not", "an", "object"]) == ["not", "an", "object"]
