"""The canonical crew schema (Orkeon EventHub & Crew Lifecycle specification, §13.1).

One JSON Schema (draft 2020-12), shipped as package data
(``orkeon_actors/config/orkeon-crew.schema.json``) and versioned by its ``$id``, is the
single source of the YAML grammar (:func:`orkeon_actors.config.load_crew`), the
Python :class:`~orkeon_actors.config.CrewBuilder` (which produces documents the same
schema validates), the TypeScript types of ``ts/`` (generated from it) and
``docs/crew-schema.md`` (generated from it, kept in sync by a test).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any, Final

from jsonschema import Draft202012Validator

__all__ = ["SCHEMA_FILE", "SCHEMA_ID", "crew_schema", "schema_text", "schema_validator"]

SCHEMA_FILE: Final = "orkeon-crew.schema.json"
"""The schema's file name inside the ``orkeon_actors.config`` package."""


@cache
def schema_text() -> str:
    """The schema file's text, byte for byte as shipped (``orkeon crew schema`` prints it)."""
    return resources.files("orkeon_actors.config").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@cache
def _schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(schema_text())
    Draft202012Validator.check_schema(loaded)
    return loaded


def crew_schema() -> dict[str, Any]:
    """A fresh copy of the schema as a dict (callers may change it freely)."""
    return copy.deepcopy(_schema())


@cache
def schema_validator() -> Draft202012Validator:
    """The draft 2020-12 validator of the schema (formats not asserted; the patterns
    say everything the schema requires)."""
    return Draft202012Validator(_schema())


SCHEMA_ID: Final[str] = str(_schema()["$id"])
"""The schema's ``$id``; its path carries the schema version (``.../crew/1.0.0/...``)."""
