"""The TypeScript package (ts/): generated types cover the whole schema, crews of every
mode compile, wrong fields do not, and a TypeScript crew (emitted as JSON by node) is the
same blueprint and the same run as its YAML and Python builder twins (spec §16.4).

Needs Node 20 (on every machine) and ``npm ci`` in ``ts/`` (run by ``.ci/run``; the
fixture runs it if ``ts/node_modules`` is missing). Nothing here is skipped."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from tests.config.crews import BUILDERS
from tests.config.test_parity import run, yaml_crew

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / "ts"
MODES = sorted(BUILDERS)


def camel(key: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), key)


def sh(*argv: str, cwd: Path = TS, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="module")
def tsc() -> str:
    node = shutil.which("node")
    npm = shutil.which("npm")
    assert node is not None and npm is not None, "Node 20 and npm are needed for the TypeScript tests"
    binary = TS / "node_modules" / ".bin" / "tsc"
    if not binary.exists():
        sh(npm, "ci", "--no-audit", "--no-fund")
    return str(binary)


@pytest.fixture(scope="module")
def emitted(tsc: str) -> dict[str, Any]:
    """Every TypeScript crew of ts/test/crews, compiled and run by node, as JSON."""
    sh(tsc, "-p", "tsconfig.json", "--noCheck")
    out = sh("node", ".build/test/emit.js").stdout
    result: dict[str, Any] = json.loads(out)
    return result


def test_the_generated_files_are_reproducible(tsc: str) -> None:
    sh("node", "scripts/generate.mjs", "--check")


def test_a_crew_of_every_mode_compiles(tsc: str) -> None:
    for mode in MODES:
        assert (TS / "test" / "crews" / f"{mode}.ts").is_file(), mode
    sh(tsc, "--noEmit", "-p", "tsconfig.json")


def test_programs_using_wrong_fields_fail_to_compile(tsc: str, tmp_path: Path) -> None:
    bad = sorted((TS / "test" / "bad").glob("*.ts"))
    config = TS / "tsconfig.bad.json"
    config.write_text(
        json.dumps({"extends": "./tsconfig.json", "include": [], "files": [str(p.relative_to(TS)) for p in bad]}),
        encoding="utf-8",
    )
    try:
        done = sh(tsc, "--noEmit", "-p", config.name, check=False)
    finally:
        config.unlink()
    assert done.returncode != 0
    errors = done.stdout
    for file, culprit in (
        ("wrong-field.ts", "idleTimeot"),
        ("wrong-enum.ts", "sideways"),
        ("wrong-mode-field.ts", "branches"),
    ):
        lines = [line for line in errors.splitlines() if file in line and "error TS" in line]
        assert lines, f"{file} compiled:\n{errors}"
        assert culprit in errors, errors


def test_the_types_cover_every_property_enum_value_and_definition_of_the_schema() -> None:
    types = (TS / "src" / "orkeon-crew.d.ts").read_text(encoding="utf-8")
    schema = ok.config.crew_schema()
    missing: list[str] = []
    walked = {"properties": 0, "values": 0}

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for key, sub in node.get("properties", {}).items():
                walked["properties"] += 1
                if not re.search(rf"(^|\s){re.escape(camel(key))}\??: ", types, re.MULTILINE):
                    missing.append(f"property {where}.{key}")
                walk(sub, f"{where}.{key}")
            for value in [*node.get("enum", ()), *([node["const"]] if "const" in node else [])]:
                walked["values"] += 1
                if json.dumps(value) not in types:
                    missing.append(f"value {where}={value!r}")
            for key, sub in node.items():
                if key not in ("properties", "enum", "const"):
                    walk(sub, where)
        elif isinstance(node, list):
            for sub in node:
                walk(sub, where)

    walk(schema, "crew")
    for name in schema["$defs"]:
        if not re.search(rf"export (interface|type) {name}\b", types):
            missing.append(f"definition {name}")
    assert walked["properties"] > 60 and walked["values"] > 20
    assert missing == [], missing


@pytest.mark.parametrize("mode", MODES)
def test_a_typescript_crew_is_the_same_blueprint_and_run_as_yaml_and_builder(
    emitted: dict[str, Any], mode: str
) -> None:
    from_ts = ok.CrewBlueprint.from_document(emitted[mode], what=f"ts/test/crews/{mode}.ts")
    assert from_ts == yaml_crew(mode) == BUILDERS[mode]()
    assert run(from_ts) == run(yaml_crew(mode))


def test_a_typescript_crew_keeps_free_form_keys_as_written(emitted: dict[str, Any]) -> None:
    sequential = emitted["sequential"]
    assert sequential["idle_timeout"] == "5m"
    step = sequential["agents"][0]["model"]["script"][1]
    assert step["arguments"] == {"topic": "reviews.requested", "timeout_ms": 60000}
    roles = emitted["autonomous"]["orchestration"]["roles"]
    assert set(roles) == {"planner", "coder"} and roles["planner"]["per_task"] is True
