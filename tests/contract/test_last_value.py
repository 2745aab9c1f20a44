"""The retained last value (spec §4, §5)."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import EventAclError, InvalidArgumentError


def _retain(key: str, crew: str | None = None) -> ok.PublishOptions:
    return ok.PublishOptions(target_crew_id=crew, retain_as_last_value=True, last_value_key=key)


def test_last_value_is_retained_and_replaced(hub: ok.EventHub) -> None:
    client = hub.bind("c", "a")
    assert client.get_last_value("status") is None
    client.publish("status.changed", {"v": 1}, _retain("status"))
    second = client.publish("status.changed", {"v": 2}, _retain("status"))
    got = client.get_last_value("status")
    assert got is not None and got.id == second.id and got.json() == {"v": 2}


def test_a_retained_json_null_is_not_an_absent_key(hub: ok.EventHub) -> None:
    client = hub.bind("c", "a")
    client.publish("s", None, _retain("nullable"))
    got = client.get_last_value("nullable")
    assert got is not None and got.json() is None and got.payload == b"null"
    assert client.get_last_value("absent") is None


def test_last_values_are_scoped_by_target_crew(hub: ok.EventHub) -> None:
    client = hub.bind("p", "a")
    client.publish("s", "global", _retain("k"))
    client.publish("s", "for x", _retain("k", "x"))
    client.publish("s", "for y", _retain("k", "y"))
    assert client.get_last_value("k").json() == "global"  # type: ignore[union-attr]
    assert hub.bind("x").get_last_value("k", crew_scope="x").json() == "for x"  # type: ignore[union-attr]
    assert hub.bind("y", "b").get_last_value("k", crew_scope="y").json() == "for y"  # type: ignore[union-attr]
    assert hub.system.get_last_value("k", crew_scope="y").json() == "for y"  # type: ignore[union-attr]
    assert hub.bind("z").get_last_value("k", crew_scope="z") is None


def test_a_crew_reads_only_the_global_slot_and_its_own(hub: ok.EventHub) -> None:
    """Issue 15: crew_scope naming another crew is refused, retained or not."""
    hub.bind("p").publish("s", "for victim", _retain("k", "victim"))
    attacker = hub.bind("attacker", "a")
    for scope in ("victim", "nobody"):
        with pytest.raises(EventAclError):
            attacker.get_last_value("k", crew_scope=scope)


def test_publishing_without_retain_does_not_touch_the_slot(hub: ok.EventHub) -> None:
    client = hub.bind("c", "a")
    client.publish("s", 1, _retain("k"))
    client.publish("s", 2)
    assert client.get_last_value("k").json() == 1  # type: ignore[union-attr]


def test_get_last_value_needs_a_key(hub: ok.EventHub) -> None:
    with pytest.raises(InvalidArgumentError):
        hub.bind("c", "a").get_last_value("")
