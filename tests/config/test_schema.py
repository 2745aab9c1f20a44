"""The canonical schema: shipped as package data, versioned, printed by the CLI, and
the source of docs/crew-schema.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

import orkeon_actors as ok
from orkeon_actors.cli.main import main
from orkeon_actors.config.schema_docs import render_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_the_schema_is_draft_2020_12_versioned_by_its_id() -> None:
    schema = ok.config.crew_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert "/crew/1.0.0/" in schema["$id"] and ok.config.SCHEMA_ID == schema["$id"]
    assert (ROOT / "orkeon_actors/config/orkeon-crew.schema.json").read_text(
        encoding="utf-8"
    ) == ok.config.schema_text()


def test_orkeon_crew_schema_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crew", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == ok.config.crew_schema()


def test_docs_crew_schema_md_is_generated_from_the_schema() -> None:
    committed = (ROOT / "docs/crew-schema.md").read_text(encoding="utf-8")
    assert committed == render_markdown(), "regenerate: orkeon crew schema --markdown > docs/crew-schema.md"


def test_the_reference_documents_every_key_and_value() -> None:
    text = render_markdown()
    schema = ok.config.crew_schema()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key in node.get("properties", {}):
                assert f"`{key}`" in text, key
            for value in node.get("enum", ()):
                assert json.dumps(value) in text, value
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    for name in schema["$defs"]:
        assert f"### {name}" in text


def test_the_package_ships_the_schema_file() -> None:
    from importlib import resources

    assert resources.files("orkeon_actors.config").joinpath("orkeon-crew.schema.json").is_file()
