"""The name registry: crew names <-> crew ids, and each name's declaration."""

from __future__ import annotations

from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclConfigError, AclRegistry, CrewLink, LinksBlock
from orkeon_actors.errors import InvalidIdError


def test_register_mints_an_id_and_resolves_both_ways() -> None:
    registry = AclRegistry()
    crew_id = registry.register_crew("fraud-crew")
    assert isinstance(crew_id, ok.CrewId)
    assert registry.name_of(crew_id) == "fraud-crew"
    assert registry.crew_ids("fraud-crew") == {crew_id}
    assert registry.declaration("fraud-crew") == LinksBlock.undeclared()


def test_every_crew_registers_its_name_even_without_links() -> None:
    registry = AclRegistry()
    crew_id = registry.register_crew("quiet", "quiet-1")
    assert crew_id == ok.CrewId("quiet-1")
    assert registry.name_of("quiet-1") == "quiet"
    block = registry.declaration("quiet")
    assert block is not None and not block.declared


def test_links_list_is_a_declaration_and_none_is_not() -> None:
    registry = AclRegistry()
    registry.register_crew("closed", links=[])
    registry.register_crew("open", links=None)
    registry.register_crew("linked", links=(CrewLink("b", "outbound"),))
    assert registry.declaration("closed") == LinksBlock.of([])
    assert registry.declaration("open") == LinksBlock.undeclared()
    linked = registry.declaration("linked")
    assert linked is not None and linked.links == (CrewLink("b", "outbound"),)


def test_instances_of_one_crew_share_its_name_and_declaration() -> None:
    registry = AclRegistry()
    links = [CrewLink("b", "outbound")]
    first = registry.register_crew("worker", links=links)
    second = registry.register_crew("worker", links=links)
    assert first != second
    assert registry.crew_ids("worker") == {first, second}


def test_registration_is_idempotent_for_the_same_id() -> None:
    registry = AclRegistry()
    crew_id = registry.register_crew("a", "a-1", links=[])
    assert registry.register_crew("a", "a-1", links=[]) == crew_id
    assert registry.crew_ids("a") == {crew_id}


def test_conflicting_registrations_are_refused() -> None:
    registry = AclRegistry()
    registry.register_crew("a", "a-1", links=[])
    with pytest.raises(AclConfigError, match="already registered as 'a'"):
        registry.register_crew("b", "a-1")
    with pytest.raises(AclConfigError, match="different links: declaration"):
        registry.register_crew("a", "a-2", links=[CrewLink("b", "outbound")])
    with pytest.raises(AclConfigError, match="different links: declaration"):
        registry.register_crew("a", "a-3")  # undeclared differs from declared-empty


def test_unregister_frees_the_name_with_its_last_id() -> None:
    registry = AclRegistry()
    one = registry.register_crew("a", links=[])
    two = registry.register_crew("a", links=[])
    registry.unregister_crew(one)
    assert registry.name_of(one) is None
    assert registry.crew_ids("a") == {two}
    registry.unregister_crew(two)
    assert registry.declaration("a") is None
    registry.register_crew("a", links=[CrewLink("b", "outbound")])  # new links are now accepted
    registry.unregister_crew("never-registered")  # ignored


def test_clients_register_under_the_client_prefix() -> None:
    registry = AclRegistry()
    crew_id = registry.register_client("studio")
    assert registry.name_of(crew_id) == "client:studio"
    block = registry.declaration("client:studio")
    assert block is not None and not block.declared
    with pytest.raises(AclConfigError, match="invalid client name"):
        registry.register_client("not a name")


@pytest.mark.parametrize("name", ["", " a", "client:studio", 42])
def test_invalid_crew_names_are_refused(name: object) -> None:
    with pytest.raises(AclConfigError):
        AclRegistry().register_crew(name)  # type: ignore[arg-type]


def test_system_and_invalid_ids_are_refused() -> None:
    registry = AclRegistry()
    with pytest.raises(InvalidIdError):
        registry.register_crew("a", ok.CrewId.SYSTEM)
    with pytest.raises(InvalidIdError):
        registry.register_crew("a", "not valid!")


@pytest.mark.parametrize("links", ["b", {"to": "b"}])
def test_raw_yaml_values_are_not_links(links: object) -> None:
    with pytest.raises(AclConfigError, match="register_crew_yaml"):
        AclRegistry().register_crew("a", links=links)  # type: ignore[arg-type]


def test_register_crew_yaml_from_text_and_from_paths(tmp_path: Path) -> None:
    registry = AclRegistry()
    text_id = registry.register_crew_yaml("name: a\nlinks:\n  - {to: b, direction: outbound}\n  - {to: c}\n")
    assert registry.name_of(text_id) == "a"
    block = registry.declaration("a")
    assert block is not None and block.links == (CrewLink("b", "outbound"),)
    assert len(block.warnings) == 1, "the YAML reader's warnings stay inspectable on the registry"
    file = tmp_path / "b.yaml"
    file.write_text("name: b\n", encoding="utf-8")
    assert registry.name_of(registry.register_crew_yaml(file, "b-1")) == "b"
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crew.yaml").write_text("name: c\nlinks: []\n", encoding="utf-8")
    assert registry.name_of(registry.register_crew_yaml(tmp_path / "c")) == "c"


def test_snapshot_is_immutable_and_replaced_on_registration() -> None:
    registry = AclRegistry()
    before = registry.snapshot
    crew_id = registry.register_crew("a")
    after = registry.snapshot
    assert before is not after
    assert before.name_of(crew_id) is None and after.name_of(crew_id) == "a"
    with pytest.raises(TypeError):
        after.names[crew_id] = "b"  # type: ignore[index]
    assert after.declaration_of(None) == LinksBlock.undeclared()
    assert after.declaration_of("unknown") == LinksBlock.undeclared()
