"""receive_message reads only the caller crew's mailboxes (spec §10.3): the write-side
ACL would be pointless if any agent could siphon another crew's mailbox, or
client://studio, by reading it. Exercised through the agent tool itself."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import CrewLink
from orkeon_actors.errors import ToolValidationError
from orkeon_actors.tools import EventHubTools
from tests.acl.conftest import World, outbound


def _tools(world: World, crew_id: ok.CrewId, agent: str = "inbox") -> EventHubTools:
    return EventHubTools(world.hub.bind(crew_id, agent))


def test_an_agent_reads_its_own_mailbox(world: World) -> None:
    a = world.crew("a", [outbound("b")])
    b = world.crew("b")
    a.client.post(b.address, {"hello": 1})
    result = _tools(world, b.id).invoke("receive_message", {"timeout_ms": 5000})
    assert result["timed_out"] is False
    assert result["message"]["payload"] == {"hello": 1}
    assert result["message"]["source_crew_id"] == str(a.id)


@pytest.mark.parametrize("template", ["agent://{crew}/inbox", "agent://{crew}/other", "crew://{crew}"])
def test_another_crews_mailbox_cannot_be_read(world: World, template: str) -> None:
    a = world.crew("a", [outbound("b")])
    b = world.crew("b")
    address = template.format(crew=b.id)
    extra = None if address == b.address else world.hub.register_mailbox(address)
    try:
        a.client.post(address, b"for b only")
        with pytest.raises(ToolValidationError, match="only mailboxes of your own crew") as info:
            _tools(world, a.id).invoke("receive_message", {"mailbox": address, "wait_forever": True})
        assert info.value.field == "mailbox"
        box = extra if extra is not None else b.mailbox
        assert box.depth() == 1, "the refused read consumed nothing"
        refused = _tools(world, a.id, "second").invoke(
            "receive_message", {"mailbox": address, "timeout_ms": 1000}, errors="result"
        )
        assert refused["error"]["field"] == "mailbox"
        assert box.depth() == 1
    finally:
        if extra is not None:
            extra.close()


def test_client_mailbox_cannot_be_siphoned(world: World) -> None:
    _, studio_box = world.client("studio")
    a = world.crew("a", [CrewLink("client:studio", "outbound")])
    b = world.crew("b")
    a.client.post("client://studio", b"for the studio")
    for reader in (a, b):  # neither the crew allowed to write there nor any other may read
        with pytest.raises(ToolValidationError) as info:
            _tools(world, reader.id).invoke("receive_message", {"mailbox": "client://studio", "timeout_ms": 1000})
        assert info.value.field == "mailbox"
    assert studio_box.depth() == 1


def test_a_mailbox_of_the_callers_own_crew_can_be_read(world: World) -> None:
    a = world.crew("a", [outbound("b")])
    b = world.crew("b")
    a.client.post(b.address, b"x")
    other_agent = _tools(world, b.id, "colleague")
    result = other_agent.invoke("receive_message", {"mailbox": b.address, "timeout_ms": 5000})
    assert result["message"]["payload"] == "x"


def test_the_receive_path_does_not_check_again(world: World) -> None:
    """Authorization happens once, on the send: a message that passed is received even
    after the link that authorized it is gone."""
    a = world.crew("a", [outbound("b")])
    b = world.crew("b")
    a.client.post(b.address, b"authorized when sent")
    world.registry.unregister_crew(a.id)
    world.registry.unregister_crew(b.id)
    result = _tools(world, b.id).invoke("receive_message", {"timeout_ms": 5000})
    assert result["message"]["payload"] == "authorized when sent"
