"""Validating a crew document against the canonical schema, every error at once.

:func:`schema_issues` turns the validator's errors into :class:`ConfigIssue` values
people can act on: the path and JSON pointer of the offending value, what was expected
and what was found (``agents[2].budget.max_tokens: expected a positive integer, got -5``),
and the position when a :class:`SourceMap` is given. A ``oneOf`` (the orchestration
modes, model references, script steps, durations) is resolved by its discriminator
(``mode:``, ``provider:``, the value's type), so the errors reported are those of the
branch the author meant, not "is not valid under any of the given schemas".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from typing import Any

from jsonschema.exceptions import ValidationError

from orkeon_actors.config.issues import ConfigIssue, Path
from orkeon_actors.config.schema import schema_validator
from orkeon_actors.config.source import SourceMap
from orkeon_actors.tools.validation import json_kind

__all__ = ["schema_issues"]

_DISCRIMINATORS = ("mode", "provider")
"""Keys whose value chooses a ``oneOf`` branch."""

_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "nothing (null)",
}

_DEF_EXPECTATIONS = {
    "Duration": "a duration: a positive number of seconds, 500ms, 30s, 5m, 1h, 1d, or ISO 8601 such as PT5M",
    "Identifier": "an id: a letter or digit, then letters, digits, '.', '_' or '-' (at most 128)",
    "TopicPattern": "a topic or pattern: dot-separated words, '*' (one word) or '#' (any words), not under _system.",
    "CrewName": (
        "a crew name: non-empty, no leading or trailing whitespace, not starting with client:, a2a: or _ (reserved)"
    ),
    "ScriptStep": "a script step: a string, {text: ...}, or {call: TOOL, arguments: {...}}",
    "ModelRef": "a model reference: {provider: scripted, script: [...]} or {provider: NAME, ...}",
}


def _got(value: Any) -> str:
    try:
        text = json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@cache
def _named_subschemas() -> dict[int, tuple[str, dict[str, Any]]]:
    """id() of each ``$defs`` entry (as the validator holds it) -> (name, schema)."""
    root = schema_validator().schema
    return {id(sub): (name, sub) for name, sub in root["$defs"].items()}


def _def_name(schema: Any) -> str | None:
    found = _named_subschemas().get(id(schema))
    return None if found is None else str(found[0])


def _resolve(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved: Mapping[str, Any] = schema_validator().schema["$defs"][ref.rsplit("/", 1)[1]]
        return resolved
    return schema


def _expected_number(schema: Mapping[str, Any]) -> str:
    integer = schema.get("type") == "integer"
    low, exclusive = schema.get("minimum"), schema.get("exclusiveMinimum")
    if (integer and low == 1) or exclusive == 0:
        return "a positive integer" if integer else "a positive number"
    if low == 0:
        return "a non-negative integer" if integer else "a non-negative number"
    bound = f">= {low}" if low is not None else f"> {exclusive}"
    return f"{'an integer' if integer else 'a number'} {bound}"


def _branch_fits(branch: Mapping[str, Any], instance: Any) -> bool:
    """Whether ``instance`` is plausibly meant for ``branch`` (its type, and the value
    of any ``const`` property, its discriminator)."""
    branch = _resolve(branch)
    kind = branch.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        actual = json_kind(instance)
        if actual not in kinds and not (actual == "integer" and "number" in kinds):
            return False
    if "const" in branch:
        return bool(branch["const"] == instance)
    if isinstance(instance, dict):
        properties = branch.get("properties", {})
        for key in _DISCRIMINATORS:
            sub = properties.get(key)
            if not isinstance(sub, Mapping) or key not in instance:
                continue
            if "const" in sub and instance[key] != sub["const"]:
                return False
            if "pattern" in sub and not (isinstance(instance[key], str) and re.search(sub["pattern"], instance[key])):
                return False
        required = branch.get("required", ())
        if required and all(k not in instance for k in required):
            return False
    return True


def _discriminator(schema: Mapping[str, Any]) -> str | None:
    for branch in schema.get("oneOf", ()):
        for key, sub in _resolve(branch).get("properties", {}).items():
            if isinstance(sub, Mapping) and "const" in sub and key == "mode":
                return str(key)
    return None


def _one_of(error: ValidationError, path: Path) -> Iterator[tuple[Path, str, bool]]:
    branches = error.schema["oneOf"] if isinstance(error.schema, Mapping) else []
    fits = [i for i, b in enumerate(branches) if _branch_fits(b, error.instance)]
    if len(fits) == 1:
        context = [e for e in error.context or () if e.relative_schema_path and e.relative_schema_path[0] == fits[0]]
        if context:
            for sub in context:
                yield from _describe(sub)
            return
    name = _def_name(error.schema)
    key = _discriminator(error.schema)
    if key is not None and isinstance(error.instance, dict):
        modes = [str(_resolve(b)["properties"][key]["const"]) for b in branches]
        given = error.instance.get(key)
        found = "it is missing" if given is None else f"got {_got(given)}"
        yield (*path, key), f"expected one of {', '.join(modes)}; {found}", False
        return
    expected = _DEF_EXPECTATIONS.get(name or "")
    if expected is None:
        words = [_TYPE_WORDS.get(str(_resolve(b).get("type")), "a value of another shape") for b in branches]
        expected = " or ".join(dict.fromkeys(w for w in words if w))
    yield path, f"expected {expected}, got {_got(error.instance)}", False


def _describe(error: ValidationError) -> Iterator[tuple[Path, str, bool]]:
    """(path, message, at_key) for one validator error (``at_key``: point at the key)."""
    path: Path = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    kind, value = error.validator, error.instance
    if kind == "oneOf":
        yield from _one_of(error, path)
    elif kind == "required":
        properties = schema.get("properties", {})
        for missing in (k for k in schema.get("required", ()) if isinstance(value, dict) and k not in value):
            what = properties.get(missing, {}).get("description", "")
            hint = f" ({what.rstrip('.')})" if what else ""
            yield (*path, missing), f"missing: this field is required{hint}", False
    elif kind == "additionalProperties":
        known = sorted(schema.get("properties", {}))
        extras = [k for k in value if k not in schema.get("properties", {})] if isinstance(value, dict) else []
        for extra in extras:
            yield (*path, extra), f"unknown key {extra!r}; expected one of: {', '.join(known)}", True
    elif kind == "type":
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        expected = " or ".join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)
        yield path, f"expected {expected}, got {_got(value)}", False
    elif kind in ("minimum", "exclusiveMinimum"):
        yield path, f"expected {_expected_number(schema)}, got {_got(value)}", False
    elif kind == "enum":
        yield path, f"expected one of {', '.join(_got(v) for v in schema['enum'])}; got {_got(value)}", False
    elif kind == "const":
        yield path, f"expected {_got(schema['const'])}, got {_got(value)}", False
    elif kind == "pattern":
        name = _def_name(schema)
        expected = str(
            _DEF_EXPECTATIONS.get(name or "") or schema.get("description") or f"text matching {schema['pattern']}"
        )
        yield path, f"expected {expected[0].lower() + expected[1:]}, got {_got(value)}", False
    elif kind == "minLength":
        yield path, f"expected a non-empty string, got {_got(value)}", False
    elif kind in ("minItems", "minProperties"):
        count = schema.get(kind)
        unit = "entry" if count == 1 else "entries"
        yield path, f"expected at least {count} {unit}, got {_got(value)}", False
    elif kind == "uniqueItems":
        yield path, f"expected no duplicates, got {_got(value)}", False
    elif kind == "propertyNames":
        for sub in error.context or ():
            yield (*path, str(sub.instance)), f"invalid key {sub.instance!r}: {sub.message}", True
    else:
        yield path, error.message, False


def schema_issues(document: Any, source: SourceMap | None = None) -> list[ConfigIssue]:
    """Every schema violation in ``document``, in document order (by position when
    known, else by path), one issue per offending value."""
    out: list[ConfigIssue] = []
    seen: set[tuple[Path, str]] = set()
    errors: Iterable[ValidationError] = schema_validator().iter_errors(document)
    for error in errors:
        for path, message, at_key in _describe(error):
            if (path, message) in seen:
                continue
            seen.add((path, message))
            position = None if source is None else source.find(path, key=at_key)
            out.append(ConfigIssue(path, message, position))
    out.sort(key=lambda i: (i.position.file, i.position.line, i.position.column) if i.position else ("", 0, 0))
    return out
