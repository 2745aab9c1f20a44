"""The openai and anthropic providers (orkeon_actors/models, registered under the
``orkeon_actors.models`` entry-point group by this package) are found by name from a
crew document, checked at their reference, and run a YAML crew against a local server
speaking the Chat Completions wire format."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import CrewStatus, query_crew
from orkeon_actors.errors import CrewConfigError
from orkeon_actors.testing import wait_until
from tests.models.fake_provider import FakeProvider, Step, openai_script, serve

CREW = """\
name: openai-crew
agents:
  - id: writer
    model:
      provider: openai
      model: gpt-test
      base_url: {base_url}
      retry: {{max_retries: 0}}
orchestration:
  mode: sequential
  tasks: [{{description: say something, agent: writer}}]
"""


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    yield from serve()


def test_both_providers_are_registered_by_entry_point() -> None:
    assert {"openai", "anthropic", "scripted"} <= set(ok.config.model_provider_names())


def test_a_yaml_crew_runs_on_the_openai_provider(provider: FakeProvider, tmp_path: Path) -> None:
    provider.handler = openai_script(Step("hello from the wire"))
    (tmp_path / "crew.yaml").write_text(CREW.format(base_url=f"{provider.url}/v1"), encoding="utf-8")
    bp = ok.load_crew(tmp_path / "crew.yaml")
    with ok.Runtime.start() as rt:
        ref = ok.start_crew(bp, rt)
        wait_until(lambda: query_crew(ref, "status") is CrewStatus.COMPLETED, what="crew completed")
        summary = query_crew(ref, "summary")
        ref.stop()
    assert summary[1] == "hello from the wire"


def test_a_bad_provider_setting_is_reported_at_the_reference(tmp_path: Path) -> None:
    text = CREW.format(base_url="http://127.0.0.1:9/v1").replace("      model: gpt-test\n", "      colour: red\n")
    (tmp_path / "crew.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(CrewConfigError) as caught:
        ok.load_crew(tmp_path / "crew.yaml")
    [issue] = caught.value.issues
    assert issue.pointer == "/agents/0/model"  # type: ignore[attr-defined]
    assert issue.position.line == 5  # type: ignore[attr-defined]
    assert "unknown openai model settings ['colour']" in issue.message  # type: ignore[attr-defined]


def test_the_openai_compatible_example_crew_runs_against_a_local_server(provider: FakeProvider, tmp_path: Path) -> None:
    """examples/crews/openai_compatible.yaml, pointed at the local server."""
    example = Path(__file__).resolve().parents[2] / "examples" / "crews" / "openai_compatible.yaml"
    text = example.read_text(encoding="utf-8").replace("http://127.0.0.1:11434/v1", f"{provider.url}/v1")
    (tmp_path / "crew.yaml").write_text(text, encoding="utf-8")
    bp = ok.load_crew(tmp_path / "crew.yaml")
    assert [a.id for a in bp.agents] == ["researcher", "writer"]
    provider.handler = openai_script(Step("published"))
    with ok.Runtime.start(middleware=[ok.config.EventDeclarations()]) as rt:
        ref = ok.start_crew(bp, rt)
        wait_until(lambda: query_crew(ref, "status") is CrewStatus.COMPLETED, what="crew completed")
        ref.stop()
    models = {r.body["model"] for r in provider.requests}
    assert models == {"qwen2.5:7b-instruct"} and len(provider.requests) == 2
