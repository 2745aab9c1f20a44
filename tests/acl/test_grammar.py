"""The links: grammar read with ruamel.yaml (spec §10.2, §10.2.1)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger

from orkeon_actors.acl import (
    AclConfigError,
    CrewLink,
    Direction,
    LinksBlock,
    load_crew_file,
    load_crew_yaml,
    load_links,
    parse_links,
)
from orkeon_actors.errors import ConfigFileError

SPEC_EXAMPLE = """\
name: billing-crew
agents:
  - id: scorer
links:
  - to: fraud-crew
    direction: bidirectional
    allowed_topics: [fraud.check, fraud.result]
  - to: audit-crew
    direction: outbound
    allowed_topics: [audit.event]
  - to: "client:studio"        # an external peer, not a crew
    direction: bidirectional
"""


@pytest.fixture
def logged() -> Iterator[list[str]]:
    """Every loguru WARNING emitted during the test."""
    records: list[str] = []
    sink = logger.add(lambda m: records.append(str(m)), level="WARNING", format="{message}")
    try:
        yield records
    finally:
        logger.remove(sink)


def test_spec_example_reads_at_the_flat_root() -> None:
    spec = load_crew_yaml(SPEC_EXAMPLE)
    assert spec.name == "billing-crew"
    assert spec.links.declared
    assert spec.links.warnings == ()
    assert spec.links.links == (
        CrewLink("fraud-crew", Direction.BIDIRECTIONAL, ("fraud.check", "fraud.result")),
        CrewLink("audit-crew", Direction.OUTBOUND, ("audit.event",)),
        CrewLink("client:studio", Direction.BIDIRECTIONAL),
    )
    assert spec.links.links[2].is_client


def test_no_links_key_is_never_declared() -> None:
    spec = load_crew_yaml("name: quiet-crew\nagents: []\n")
    assert spec.links == LinksBlock.undeclared()
    assert not spec.links.declared
    assert spec.links.warnings == ()


def test_bare_links_reads_as_never_declared_with_a_warning(logged: list[str]) -> None:
    spec = load_crew_yaml("name: a\nlinks:\n")
    assert not spec.links.declared
    assert spec.links.links == ()
    assert len(spec.links.warnings) == 1
    assert "links: []" in spec.links.warnings[0].message
    assert any("reads as never declared" in line for line in logged)


def test_empty_list_is_a_declaration_that_closes_the_door() -> None:
    spec = load_crew_yaml("name: a\nlinks: []\n")
    assert spec.links.declared
    assert spec.links.links == ()
    assert spec.links.warnings == ()


MALFORMED = """\
name: a
links:
  - direction: outbound                # no to:
  - to: b
    direction: sideways                # unreadable direction
  - to: c                              # no direction at all
  - to: d
    direction: Outbound                # not guessed, not even the case
  - to: e
    direction: outbound
    allowed_topic: [x]                 # misspelt key: would widen to every topic
  - to: f
    direction: outbound
    allowed_topics: fraud.check        # not a list
  - to: g
    direction: outbound
    allowed_topics: [ok.topic, "bad topic"]
  - just-a-string
  - to: 42
    direction: outbound
  - to: ""
    direction: outbound
  - to: "client:"
    direction: outbound
  - to: null
    direction: outbound
  - to: h
    direction: null
"""


def test_malformed_entries_are_discarded_with_warnings_and_the_block_closes(logged: list[str]) -> None:
    spec = load_crew_yaml(MALFORMED)
    block = spec.links
    assert block.declared, "a block whose entries all failed to parse must close the door, never open it"
    assert block.links == ()
    assert [w.index for w in block.warnings] == list(range(13))
    assert [w.line for w in block.warnings] == [3, 4, 6, 7, 9, 12, 15, 18, 19, 21, 23, 25, 27]
    messages = [w.message for w in block.warnings]
    assert "no to:" in messages[0]
    assert "unreadable direction 'sideways'" in messages[1]
    assert "no direction:" in messages[2]
    assert "'Outbound'" in messages[3]
    assert "'allowed_topic'" in messages[4]
    assert "not a list" in messages[5]
    assert "bad topic" in messages[6]
    assert "not a mapping" in messages[7]
    assert "not a string" in messages[8]
    assert "no to:" in messages[11]
    assert "no direction:" in messages[12]
    assert all("discarded" in m for m in messages)
    assert len([line for line in logged if "discarded" in line]) == 13
    assert all("crew 'a'" in line for line in logged)


def test_good_entries_survive_beside_malformed_ones() -> None:
    block = load_links("name: a\nlinks:\n  - to: b\n    direction: outbound\n  - to: c\n    direction: whichever\n")
    assert block.declared
    assert block.links == (CrewLink("b", "outbound"),)
    assert len(block.warnings) == 1 and block.warnings[0].index == 1


@pytest.mark.parametrize("value", ["{to: b, direction: outbound}", "b", "42", "true"])
def test_a_block_that_is_not_a_list_declares_nothing_usable(value: str, logged: list[str]) -> None:
    block = load_links(f"name: a\nlinks: {value}\n")
    assert block.declared
    assert block.links == ()
    assert len(block.warnings) == 1 and block.warnings[0].index is None
    assert "must be a list" in block.warnings[0].message
    assert logged


def test_null_or_empty_allowed_topics_mean_every_topic() -> None:
    block = load_links(
        "links:\n"
        "  - {to: b, direction: outbound, allowed_topics: []}\n"
        "  - {to: c, direction: inbound, allowed_topics: null}\n"
        "  - {to: d, direction: bidirectional}\n"
    )
    assert [link.allowed_topics for link in block.links] == [(), (), ()]
    assert block.warnings == ()


def test_names_are_matched_verbatim() -> None:
    block = load_links("links:\n  - to: Fraud-Crew\n    direction: outbound\n")
    assert block.links[0].to == "Fraud-Crew"


def test_parse_links_on_python_values() -> None:
    assert parse_links(None, present=False) == LinksBlock.undeclared()
    assert parse_links([], crew="a") == LinksBlock.of([])
    block = parse_links([{"to": "b", "direction": "inbound"}, {"to": "c"}], crew="a")
    assert block.links == (CrewLink("b", "inbound"),)
    assert block.warnings[0].index == 1 and block.warnings[0].line is None
    assert str(block.warnings[0]).startswith("links entry #2")


def test_warnings_do_not_change_what_a_block_authorizes() -> None:
    assert parse_links([{"to": "b", "direction": "inbound"}, {"to": "c"}]) == LinksBlock.of([CrewLink("b", "inbound")])


def test_undeclared_block_cannot_carry_links() -> None:
    with pytest.raises(AclConfigError):
        LinksBlock(False, (CrewLink("b", "outbound"),))
    with pytest.raises(AclConfigError):
        LinksBlock(True, ({"to": "b"},))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("agents: []\n", "no name:"),
        ("crew:\n  name: a\n  links: []\n", "spec §13.3"),
        ("name: 42\n", "invalid name:"),
        ("name: ''\n", "invalid name:"),
        ("name: 'client:studio'\n", "reserved"),
        ("- a\n- b\n", "mapping at its root"),
        ("", "mapping at its root"),
        ("name: a\nname: b\n", "not valid YAML"),
        ("name: a\nlinks: [\n", "not valid YAML"),
        (
            "name: a\nlinks:\n  - to: b\n    direction: outbound\n    direction: inbound\n",
            "not valid YAML",
        ),
    ],
)
def test_crew_yaml_errors(text: str, match: str) -> None:
    with pytest.raises(AclConfigError, match=match):
        load_crew_yaml(text)


def test_load_crew_file_and_multi_file_layout(tmp_path: Path) -> None:
    single = tmp_path / "billing.yaml"
    single.write_text(SPEC_EXAMPLE, encoding="utf-8")
    assert load_crew_file(single).name == "billing-crew"
    layout = tmp_path / "fraud"
    layout.mkdir()
    (layout / "crew.yaml").write_text("name: fraud-crew\nlinks: []\n", encoding="utf-8")
    spec = load_crew_file(layout)
    assert spec.name == "fraud-crew" and spec.links == LinksBlock.of([])
    with pytest.raises(ConfigFileError, match="No such file"):
        load_crew_file(tmp_path / "missing.yaml")


def test_error_names_the_source_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("agents: []\n", encoding="utf-8")
    with pytest.raises(AclConfigError, match=r"broken\.yaml"):
        load_crew_file(broken)


def test_the_yaml_examples_of_docs_acl_read_as_documented() -> None:
    """docs/acl.md: each YAML example, as (name, declared, usable links, warnings)."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "acl.md"
    blocks = re.findall(r"```yaml\n(.*?)```", docs.read_text(encoding="utf-8"), re.S)
    read = []
    for block in blocks:
        spec = load_crew_yaml(block)
        read.append((spec.name, spec.links.declared, len(spec.links.links), len(spec.links.warnings)))
    assert read == [
        ("billing-crew", True, 3, 0),
        ("a", False, 0, 0),  # no links: key
        ("a", False, 0, 1),  # bare links:
        ("a", True, 0, 0),  # links: []
        ("a", True, 0, 5),  # every entry discarded: the door is closed
        ("order-crew", True, 1, 0),
        ("ledger-crew", True, 1, 0),
        ("intake-crew", True, 0, 0),
        ("report-crew", True, 1, 0),
    ]
