"""``docs/crew-schema.md``, generated from the canonical schema.

:func:`render_markdown` is deterministic (same schema, same bytes); a test compares its
output with the committed file, so the two cannot drift. Regenerate with::

    orkeon crew schema --markdown > docs/crew-schema.md
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orkeon_actors.config.schema import crew_schema

__all__ = ["render_markdown"]


def _anchor(name: str) -> str:
    return name.lower()


def _type(schema: Mapping[str, Any]) -> str:
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[1]
        return f"[{name}](#{_anchor(name)})"
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "oneOf" in schema:
        return " or ".join(
            _type(branch) if "properties" not in branch else "mapping (below)" for branch in schema["oneOf"]
        )
    kind = schema.get("type")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind == "array":
        items = schema.get("items", {})
        return f"list of {'mappings (below)' if 'properties' in items else _type(items)}"
    if kind == "object" and "properties" in schema:
        return "mapping (below)"
    if kind == "object" and "additionalProperties" in schema and "properties" not in schema:
        extra = schema["additionalProperties"]
        return f"map of {_type(extra) if isinstance(extra, Mapping) else 'anything'}"
    text = str(kind or "any")
    if "pattern" in schema:
        text += f" matching `{schema['pattern']}`"
    bounds = [f"{k} {schema[k]}" for k in ("minimum", "exclusiveMinimum", "minItems", "minLength") if k in schema]
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _inline_objects(name: str, schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The objects written inline under ``schema`` (list items, ``oneOf`` branches,
    nested mappings), each with a name saying where it sits."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    for key, sub in schema.get("properties", {}).items():
        found += _nested(f"{name}.{key}", sub)
    for index, branch in enumerate(schema.get("oneOf", ())):
        found += _nested(f"{name} (form {index + 1})", branch)
    return found


def _nested(name: str, schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    if "properties" in schema:
        return [(name, schema), *_inline_objects(name, schema)]
    if isinstance(schema.get("items"), Mapping):
        return _nested(f"{name}[]", schema["items"])
    return [entry for index, branch in enumerate(schema.get("oneOf", ())) for entry in _nested(name, branch)]


def _section(name: str, schema: Mapping[str, Any], level: str) -> list[str]:
    out = _table(name, schema, level)
    for inner, sub in _inline_objects(name, schema):
        out += _table(inner, sub, level + "#")
    return out


def _table(name: str, schema: Mapping[str, Any], level: str) -> list[str]:
    out = [f"{level} {name}", ""]
    if schema.get("description"):
        out += [str(schema["description"]), ""]
    properties: Mapping[str, Any] = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", ()))
        out += ["| Key | Type | Required | Description |", "|---|---|---|---|"]
        for key, sub in properties.items():
            flag = "yes" if key in required else ""
            out.append(f"| `{key}` | {_cell(_type(sub))} | {flag} | {_cell(str(sub.get('description', '')))} |")
        extra = schema.get("additionalProperties", True)
        out += ["", "Other keys: " + ("refused." if extra is False else "accepted (passed to the provider)."), ""]
    else:
        out += [f"Type: {_type(schema)}", ""]
    return out


def render_markdown() -> str:
    """The Markdown reference of the schema (see the module docstring)."""
    schema = crew_schema()
    lines = [
        "# Crew schema reference",
        "",
        "<!-- Generated from orkeon_actors/config/orkeon-crew.schema.json by",
        "     `orkeon crew schema --markdown`; do not edit by hand (a test compares the two). -->",
        "",
        f"Schema `$id`: `{schema['$id']}` (JSON Schema draft 2020-12). How to write, validate and run crews:",
        "[crew-config.md](crew-config.md).",
        "",
        *_section("OrkeonCrew (the document root)", schema, "##"),
        "## Definitions",
        "",
    ]
    for name, sub in schema["$defs"].items():
        lines += _section(name, sub, "###")
    return "\n".join(lines).rstrip("\n") + "\n"
