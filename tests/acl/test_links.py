"""CrewLink and Direction: the value types of the links: grammar (spec §10.2-§10.3)."""

from __future__ import annotations

import attrs
import pytest

from orkeon_actors.acl import AclConfigError, CrewLink, Direction, client_link_name
from orkeon_actors.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("direction", "declarer_sends", "peer_sends"),
    [
        (Direction.OUTBOUND, True, False),  # A can send to B, not the other way around
        (Direction.INBOUND, False, True),  # B can send to A, not the other way around
        (Direction.BIDIRECTIONAL, True, True),  # both directions
    ],
)
def test_direction_table(direction: Direction, declarer_sends: bool, peer_sends: bool) -> None:
    assert direction.lets_declarer_send is declarer_sends
    assert direction.lets_peer_send is peer_sends


@pytest.mark.parametrize("text", ["outbound", "inbound", "bidirectional"])
def test_direction_parses_the_three_words(text: str) -> None:
    assert Direction.parse(text).value == text
    assert Direction.parse(Direction(text)) is Direction(text)


@pytest.mark.parametrize("value", ["Outbound", " outbound", "both", "in", "", None, 1, True, ["outbound"]])
def test_direction_is_never_guessed(value: object) -> None:
    with pytest.raises(AclConfigError, match="outbound, inbound or bidirectional"):
        Direction.parse(value)


def test_crew_link_is_a_frozen_value() -> None:
    link = CrewLink("fraud-crew", "bidirectional", ["fraud.check", "fraud.result"])
    assert link.direction is Direction.BIDIRECTIONAL
    assert link.allowed_topics == ("fraud.check", "fraud.result")
    assert link == CrewLink("fraud-crew", Direction.BIDIRECTIONAL, ("fraud.check", "fraud.result"))
    assert hash(link) == hash(CrewLink("fraud-crew", "bidirectional", ("fraud.check", "fraud.result")))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        link.to = "other"  # type: ignore[misc]
    assert not link.is_client
    assert str(link) == "{to: fraud-crew, direction: bidirectional, allowed_topics: [fraud.check, fraud.result]}"


def test_empty_allowed_topics_allows_every_topic() -> None:
    link = CrewLink("b", "outbound")
    assert link.allowed_topics == ()
    assert link.allows_topic("anything.at.all")
    assert CrewLink("b", "outbound", None).allows_topic("x")


def test_allowed_topics_constrain_and_accept_wildcards() -> None:
    link = CrewLink("b", "outbound", ["fraud.check", "audit.*", "ops.#"])
    assert link.allows_topic("fraud.check")
    assert not link.allows_topic("fraud.result")
    assert link.allows_topic("audit.event")
    assert not link.allows_topic("audit.event.extra")
    assert link.allows_topic("ops")
    assert link.allows_topic("ops.db.down")


def test_client_links() -> None:
    link = CrewLink("client:studio", "bidirectional")
    assert link.is_client
    assert CrewLink.client("studio", Direction.BIDIRECTIONAL) == link
    assert client_link_name("studio") == "client:studio"


@pytest.mark.parametrize("to", ["", " fraud", "fraud ", 42, None, "client:", "client:bad name", "client:-x"])
def test_malformed_to_is_refused(to: object) -> None:
    with pytest.raises(AclConfigError):
        CrewLink(to, "outbound")  # type: ignore[arg-type]


@pytest.mark.parametrize("topics", ["fraud.check", ["bad topic"], ["a..b"], [42], b"x"])
def test_malformed_allowed_topics_are_refused(topics: object) -> None:
    with pytest.raises(AclConfigError):
        CrewLink("b", "outbound", topics)  # type: ignore[arg-type]


def test_config_errors_are_value_errors() -> None:
    assert issubclass(AclConfigError, InvalidArgumentError)
    assert issubclass(AclConfigError, ValueError)
