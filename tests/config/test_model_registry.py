"""Model references resolve through the provider registry and the
``orkeon_actors.models`` entry-point group."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.config import ModelContext, model_registry
from orkeon_actors.crew import ModelRequest, ModelResponse, respond
from orkeon_actors.errors import CrewConfigError, InvalidArgumentError
from orkeon_actors.sim.simulation import Simulation

CREW = """\
name: echoes
agents:
  - id: a
    model: {provider: echo, model: loud, prefix: ">> "}
orchestration:
  mode: sequential
  tasks: [{description: say hi, agent: a}]
"""

PROVIDER_MODULE = """
import json

from orkeon_actors.crew import respond

class EchoModel:
    def __init__(self, prefix, context):
        self.prefix, self.context = prefix, context

    def complete(self, request):
        return respond(self.prefix + self.context.agent_id + " heard " + json.loads(request.task)["task"])

class EchoProvider:
    def check(self, options):
        return [] if isinstance(options.get("prefix", ""), str) else ["prefix: expected a string"]

    def create(self, options, context):
        return EchoModel(options.get("prefix", ""), context)

PROVIDER = EchoProvider()
"""


@pytest.fixture
def echo_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An installed provider package: a distribution whose entry point registers
    ``echo`` under the ``orkeon_actors.models`` group."""
    (tmp_path / "echo_provider.py").write_text(PROVIDER_MODULE, encoding="utf-8")
    info = tmp_path / "echo_provider-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-provider\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[orkeon_actors.models]\necho = echo_provider:PROVIDER\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    model_registry.reload_entry_points()
    yield
    model_registry.reload_entry_points()


def test_the_group_name_is_orkeon_actors_models() -> None:
    assert ok.config.ENTRY_POINT_GROUP == "orkeon_actors.models"
    assert "scripted" in ok.config.model_provider_names()


def test_an_entry_point_provider_is_found_by_name_and_runs(echo_package: None, tmp_path: Path) -> None:
    assert "echo" in ok.config.model_provider_names()
    (tmp_path / "crew.yaml").write_text(CREW, encoding="utf-8")
    bp = ok.load_crew(tmp_path / "crew.yaml")
    assert bp.agents[0].model == ok.config.ModelRef(provider="echo", options={"model": "loud", "prefix": ">> "})
    with Simulation() as sim:
        crew = sim.spawn(bp)
        status, result, _ = sim.run().crews[crew]
    assert status is ok.crew.CrewStatus.COMPLETED
    assert result == ">> a heard say hi"


def test_a_providers_own_check_is_reported_at_the_reference(echo_package: None, tmp_path: Path) -> None:
    (tmp_path / "crew.yaml").write_text(CREW.replace('prefix: ">> "', "prefix: 3"), encoding="utf-8")
    with pytest.raises(CrewConfigError) as caught:
        ok.load_crew(tmp_path / "crew.yaml")
    [issue] = caught.value.issues
    assert issue.pointer == "/agents/0/model" and issue.message == "prefix: expected a string"  # type: ignore[attr-defined]
    assert issue.position.line == 4  # type: ignore[attr-defined]


def test_an_unknown_provider_names_the_group_to_register_in(tmp_path: Path) -> None:
    (tmp_path / "crew.yaml").write_text(CREW, encoding="utf-8")
    model_registry.reload_entry_points()
    with pytest.raises(
        CrewConfigError, match=r"unknown model provider 'echo'.*'orkeon_actors\.models' entry-point group"
    ):
        ok.load_crew(tmp_path / "crew.yaml")


def test_providers_registered_in_code(tmp_path: Path) -> None:
    seen: list[tuple[Mapping[str, Any], ModelContext]] = []

    class Fixed:
        def complete(self, request: ModelRequest) -> ModelResponse:
            return respond(f"fixed for {request.agent_id}")

    def provider(options: Mapping[str, Any], context: ModelContext) -> Fixed:
        seen.append((options, context))
        return Fixed()

    ok.config.register_model_provider("fixed", provider)
    try:
        with pytest.raises(InvalidArgumentError, match="registered already"):
            ok.config.register_model_provider("fixed", provider)
        bp = (
            ok.CrewBuilder()
            .name("f")
            .agent("a", model={"provider": "fixed", "model": "m1"})
            .sequential([("t", "a")])
            .build()
        )
        with Simulation() as sim:
            crew = sim.spawn(bp)
            assert sim.run().crews[crew][1] == "fixed for a"
        [(options, context)] = seen
        assert options == {"model": "m1"}
        assert (context.crew_name, context.crew_id, context.agent_id) == ("f", crew, "a")
    finally:
        ok.config.unregister_model_provider("fixed")
    assert ok.config.model_provider("fixed") is None


def test_the_scripted_provider_cannot_be_replaced_or_removed() -> None:
    def provider(options: Mapping[str, Any], context: ModelContext) -> Sequence[str]:
        raise AssertionError("never built")

    with pytest.raises(InvalidArgumentError):
        ok.config.register_model_provider("scripted", provider)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        ok.config.unregister_model_provider("scripted")
