"""``load_crew``: single and multi-file YAML, every error at once with its position."""

from __future__ import annotations

from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import CrewLink, Direction
from orkeon_actors.errors import CrewConfigError

VALID = """\
name: billing-crew
idle_timeout: PT5M
agents:
  - id: scorer
    model: {provider: scripted, script: [scored]}
orchestration:
  mode: sequential
  tasks: [{description: score it, agent: scorer}]
"""


def write(tmp_path: Path, text: str, name: str = "crew.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def issues_of(path: Path, **options: bool) -> list[ok.config.ConfigIssue]:
    with pytest.raises(CrewConfigError) as caught:
        ok.load_crew(path, **options)
    return list(caught.value.issues)  # type: ignore[arg-type]


def test_a_single_file_crew_loads_into_a_blueprint(tmp_path: Path) -> None:
    bp = ok.load_crew(write(tmp_path, VALID))
    assert bp.name == "billing-crew"
    assert bp.idle_timeout == 300.0
    assert [a.id for a in bp.agents] == ["scorer"]
    assert bp.orchestration.mode == "sequential"
    assert not bp.links.declared


def test_every_error_is_reported_at_once_with_file_line_column_and_pointer(tmp_path: Path) -> None:
    text = """\
name: demo
agents:
  - id: a
    model: {provider: scripted, script: [hi]}
  - id: b
    model: {provider: scripted, script: [hi]}
  - id: c
    model: {provider: scripted, script: [hi]}
    budget:
      max_tokens: -5
orchestration:
  mode: sequential
  tasks: [{description: x, agent: a}]
  extra: 1
idle_timeout: soon
"""
    found = issues_of(write(tmp_path, text))
    assert [(i.pointer, i.position.line, i.position.column) for i in found if i.position] == [
        ("/agents/2/budget/max_tokens", 10, 19),
        ("/orchestration/extra", 14, 3),
        ("/idle_timeout", 15, 15),
    ]
    first = str(found[0])
    assert first == f"agents[2].budget.max_tokens: expected a positive integer, got -5 ({tmp_path / 'crew.yaml'}:10:19)"
    assert "unknown key 'extra'" in found[1].message and "tasks" in found[1].message
    assert "expected a duration" in found[2].message and '"soon"' in found[2].message


@pytest.mark.parametrize(
    ("replace", "pointer", "line", "expected"),
    [
        # wrong types
        (("name: billing-crew", "name: 42"), "/name", 1, "expected a string, got 42"),
        (
            ("    model: {provider: scripted, script: [scored]}", "    model: scripted"),
            "/agents/0/model",
            5,
            "expected a model reference",
        ),
        # unknown keys
        (("  - id: scorer", "  - id: scorer\n    rolle: x"), "/agents/0/rolle", 5, "unknown key 'rolle'"),
        (("idle_timeout: PT5M", "idle_timeout: PT5M\ncrew: {}"), "/crew", 3, "unknown key 'crew'"),
        # missing required fields
        (("    model: {provider: scripted, script: [scored]}\n", ""), "/agents/0/model", 4, "missing"),
        (
            ("  tasks: [{description: score it, agent: scorer}]", "  tasks: [{description: score it}]"),
            "/orchestration/tasks/0/agent",
            8,
            "missing",
        ),
        # bad durations
        (("idle_timeout: PT5M", "idle_timeout: 5 minutes"), "/idle_timeout", 2, "expected a duration"),
        (("idle_timeout: PT5M", "idle_timeout: -3"), "/idle_timeout", 2, "expected a positive number, got -3"),
        (("idle_timeout: PT5M", "idle_timeout: P"), "/idle_timeout", 2, "expected a duration"),
        # bad links
        (
            ("idle_timeout: PT5M", "idle_timeout: PT5M\nlinks:\n  - to: fraud-crew\n    direction: sideways"),
            "/links/0/direction",
            5,
            'expected one of "outbound", "inbound", "bidirectional"',
        ),
        (("idle_timeout: PT5M", "idle_timeout: PT5M\nlinks:\n  - direction: outbound"), "/links/0/to", 4, "missing"),
        (
            ("idle_timeout: PT5M", "idle_timeout: PT5M\nlinks: {to: fraud-crew}"),
            "/links",
            3,
            "expected nothing (null) or a list",
        ),
        (
            ("idle_timeout: PT5M", "idle_timeout: PT5M\nlinks:\n  - {to: x, direction: outbound, allowed_topic: [a]}"),
            "/links/0/allowed_topic",
            4,
            "unknown key 'allowed_topic'",
        ),
        # references between parts
        (("agent: scorer}]", "agent: nobody}]"), "/orchestration/tasks/0/agent", 8, "names agent 'nobody'"),
        (
            ("provider: scripted, script: [scored]", "provider: nowhere, model: x"),
            "/agents/0/model",
            5,
            "unknown model provider 'nowhere'",
        ),
    ],
)
def test_each_invalid_document_is_rejected_with_the_right_pointer_and_line(
    tmp_path: Path, replace: tuple[str, str], pointer: str, line: int, expected: str
) -> None:
    assert replace[0] in VALID
    found = issues_of(write(tmp_path, VALID.replace(*replace)))
    match = [i for i in found if i.pointer == pointer]
    assert match, f"no issue at {pointer}: {[str(i) for i in found]}"
    assert match[0].position is not None and match[0].position.line == line, str(match[0])
    assert expected in match[0].message


def test_yaml_syntax_errors_and_duplicate_keys_are_issues_with_positions(tmp_path: Path) -> None:
    [broken] = issues_of(write(tmp_path, "name: [unclosed\nagents: []\n"))
    assert "not valid YAML" in broken.message and broken.position is not None
    [duplicate] = issues_of(write(tmp_path, "name: a\nname: b\n", "dup.yaml"))
    assert "duplicate" in duplicate.message and duplicate.position is not None
    assert duplicate.position.line == 2


def test_links_read_exactly_as_section_10_2(tmp_path: Path) -> None:
    absent = ok.load_crew(write(tmp_path, VALID, "absent.yaml")).links
    bare = ok.load_crew(write(tmp_path, VALID + "links:\n", "bare.yaml")).links
    closed = ok.load_crew(write(tmp_path, VALID + "links: []\n", "closed.yaml")).links
    one = ok.load_crew(
        write(tmp_path, VALID + "links:\n  - {to: 'client:studio', direction: outbound}\n", "one.yaml")
    ).links
    assert (absent.declared, bare.declared, closed.declared) == (False, False, True)
    assert bare.warnings and "links: []" in bare.warnings[0].message
    assert closed.links == ()
    assert one.links == (CrewLink("client:studio", Direction.OUTBOUND),)


def test_a_malformed_link_entry_closes_the_door_when_lenient(tmp_path: Path) -> None:
    path = write(tmp_path, VALID + "links:\n  - {to: fraud-crew, direction: sideways}\n")
    assert [i.pointer for i in issues_of(path)] == ["/links/0/direction"]
    block = ok.load_crew(path, lenient_links=True).links
    assert block.declared and block.links == ()  # declared: the door is closed, not opened
    assert block.warnings and "direction" in block.warnings[0].message


def test_the_multi_file_layout_reads_crew_yaml_and_one_file_per_agent(tmp_path: Path) -> None:
    crew = tmp_path / "billing"
    write(
        crew,
        "name: billing-crew\norchestration:\n  mode: sequential\n  tasks:\n"
        "    - {description: a, agent: scorer}\n    - {description: b, agent: writer}\n",
    )
    write(crew, "id: scorer\nmodel: {provider: scripted, script: [scored]}\n", "agents/1-scorer.yaml")
    write(crew, "id: writer\nmodel: {provider: scripted, script: [written]}\n", "agents/2-writer.yaml")
    bp = ok.load_crew(crew)
    assert [a.id for a in bp.agents] == ["scorer", "writer"]
    single = ok.load_crew(write(tmp_path, VALID.replace("billing-crew", "x")))
    assert single.agents[0].model == bp.agents[0].model


def test_multi_file_errors_name_the_agent_file(tmp_path: Path) -> None:
    crew = tmp_path / "billing"
    write(
        crew,
        "name: billing-crew\nagents:\n  - agents/scorer.yaml\n  - agents/missing.yaml\n"
        "orchestration:\n  mode: sequential\n  tasks: [{description: a, agent: scorer}]\n",
    )
    write(
        crew,
        "id: scorer\nbudget:\n  max_tool_calls: 0\nmodel: {provider: scripted, script: [x]}\n",
        "agents/scorer.yaml",
    )
    found = issues_of(crew)
    missing = [i for i in found if "cannot read" in i.message]
    assert missing and missing[0].position is not None and missing[0].position.line == 4
    [budget] = [i for i in issues_of_after_fix(crew) if i.pointer == "/agents/0/budget/max_tool_calls"]
    assert budget.position is not None
    assert budget.position.file.endswith("scorer.yaml") and budget.position.line == 3


def issues_of_after_fix(crew: Path) -> list[ok.config.ConfigIssue]:
    (crew / "crew.yaml").write_text(
        (crew / "crew.yaml").read_text().replace("  - agents/missing.yaml\n", ""), encoding="utf-8"
    )
    return issues_of(crew)


def test_blueprints_are_immutable_values(tmp_path: Path) -> None:
    bp = ok.load_crew(write(tmp_path, VALID))
    with pytest.raises(AttributeError):
        bp.name = "other"  # type: ignore[misc]
    assert bp == ok.load_crew(write(tmp_path, VALID, "again.yaml"))
    assert hash(bp) == hash(ok.load_crew(write(tmp_path, VALID, "again.yaml")))
