"""A crew may not take a reserved name (``_system`` is the hub itself; every ``_...`` is
the hub's, every ``client:...`` an external peer's, every ``a2a:...`` an external A2A
agent's) on any configuration path: YAML, the
builder, a TypeScript crew's JSON through the canonical schema, the ACL registry and the
supervisor's factories. Before, ``name: _system`` was a valid crew."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclConfigError, AclRegistry, load_crew_yaml
from orkeon_actors.config.schema import schema_text
from orkeon_actors.crew import Agent, ScriptedModel
from orkeon_actors.errors import CrewConfigError
from orkeon_actors.lifecycle import CrewBlueprint as Factory
from orkeon_actors.lifecycle import CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task

ROOT = Path(__file__).resolve().parents[2]
RESERVED = ["_system", "_SYSTEM", "_global", "_", "client:studio", "a2a:weather"]
CREW = "agents:\n  - {id: a, model: {provider: scripted, script: [hi]}}\n"
CREW += "orchestration: {mode: sequential, tasks: [{description: go, agent: a}]}\n"


def _document(name: str) -> dict[str, object]:
    return {
        "name": name,
        "agents": [{"id": "a", "model": {"provider": "scripted", "script": ["hi"]}}],
        "orchestration": {"mode": "sequential", "tasks": [{"description": "go", "agent": "a"}]},
    }


@pytest.mark.parametrize("name", RESERVED)
def test_a_yaml_crew_with_a_reserved_name_is_refused(tmp_path: Path, name: str) -> None:
    crew = tmp_path / "crew.yaml"
    crew.write_text(f"name: {json.dumps(name)}\n{CREW}", encoding="utf-8")
    with pytest.raises(CrewConfigError) as refused:
        ok.load_crew(crew)
    [issue] = refused.value.issues
    assert isinstance(issue, ok.config.ConfigIssue) and issue.pointer == "/name"
    assert "reserved" in issue.message and issue.position is not None and issue.position.line == 1


@pytest.mark.parametrize("name", RESERVED)
def test_the_builder_refuses_a_reserved_name(name: str) -> None:
    builder = ok.CrewBuilder().name(name).agent("a", model=ok.scripted(["hi"])).sequential([("go", "a")])
    with pytest.raises(CrewConfigError, match="reserved"):
        builder.build()


@pytest.mark.parametrize("name", RESERVED)
def test_a_typescript_crew_is_refused_by_the_canonical_schema(name: str) -> None:
    """defineCrew emits JSON; Python reads it with the one schema, which the TypeScript
    package is generated from (the same pattern is in its copy)."""
    with pytest.raises(CrewConfigError, match="reserved"):
        ok.CrewBlueprint.from_document(json.loads(json.dumps(_document(name))))
    pattern = json.loads(schema_text())["$defs"]["CrewName"]["pattern"]
    assert json.dumps(pattern) in (ROOT / "ts/src/schema.generated.ts").read_text()


@pytest.mark.parametrize("name", ["_system", "_x"])
def test_the_acl_refuses_a_reserved_name(name: str) -> None:
    with pytest.raises(AclConfigError, match="reserved for the hub"):
        AclRegistry().register_crew(name)
    with pytest.raises(AclConfigError, match="reserved for the hub"):
        load_crew_yaml(f"name: {name}\nlinks: []\n")


def _factory(_crew: ok.CrewId) -> Factory:
    agent = Agent("a", ScriptedModel(["hi"]))
    return Factory(agents=[agent], orchestration=Sequential([Task("go", "a")]))


def test_the_supervisor_refuses_a_reserved_factory_or_crew_name(tmp_path: Path) -> None:
    with ok.Runtime.start(store=tmp_path / "s.db") as rt:
        with pytest.raises(AclConfigError, match="reserved for the hub"):
            CrewSupervisor(rt, factories={"_system": _factory})
        supervisor = CrewSupervisor(rt, factories={"ok": _factory})
        try:
            with pytest.raises(AclConfigError, match="reserved for the hub"):
                supervisor.register_factory("_system", _factory)
            with pytest.raises(AclConfigError, match="reserved for the hub"):
                supervisor.spawn("_system")
            assert "_system" not in supervisor.factories
        finally:
            supervisor.stop()


def test_a_name_merely_containing_an_underscore_is_fine() -> None:
    assert ok.CrewBlueprint.from_document(_document("billing_crew")).name == "billing_crew"
