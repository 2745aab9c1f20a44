"""Presence across two gateways on the real broker: signed heartbeats build the union
view, a forged announcement is refused, and a silent host disappears by itself."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Iterator

import pytest

from orkeon_actors.fleet.roster import Roster
from orkeon_actors.fleet.signing import HostKeys, Signer, Verifier
from orkeon_actors.hub.amqp.link import BrokerLink, Outgoing
from orkeon_actors.hub.amqp.topology import ROSTER_EXCHANGE, Declarer
from orkeon_actors.testing import wait_until

from .conftest import url

pytestmark = pytest.mark.rabbitmq


def _now_ms() -> int:
    return int(time.time() * 1000)


class Host:
    def __init__(self, vhost: str, name: str, keys: HostKeys, **options: object) -> None:
        self.link = BrokerLink(url(vhost), name=name, on_connected=Declarer().shared().roster(name).run).start()
        verifier = Verifier(keys, lambda _sender: None, _now_ms)
        self.roster = Roster(name, self.link, Signer(name, keys), verifier, **options).start()  # type: ignore[arg-type]

    def stop(self) -> None:
        self.roster.stop()
        self.link.stop()


@pytest.fixture
def fleet(vhost: str) -> Iterator[tuple[Host, Host, HostKeys]]:
    suffix = uuid.uuid4().hex[:6]
    a, b = f"host-a-{suffix}", f"host-b-{suffix}"
    keys = HostKeys({a: secrets.token_bytes(32), b: secrets.token_bytes(32)})
    host_a = Host(vhost, a, keys, interval=0.2, ttl=1.0, kinds=["billing"])
    host_b = Host(vhost, b, keys, interval=0.2, ttl=1.0)
    yield host_a, host_b, keys
    host_a.stop()
    host_b.stop()


def test_each_gateway_sees_the_others_entities(fleet: tuple[Host, Host, HostKeys]) -> None:
    a, b, _ = fleet
    a.roster.add(["agent://billing/scorer"])
    assert a.roster.lives_on("agent://billing/scorer") == a.roster.host  # local first
    wait_until(lambda: b.roster.lives_on("agent://billing/scorer") == a.roster.host, what="b seeing a's agent")
    wait_until(lambda: b.roster.hosts().get(a.roster.host) == ("billing",), what="a's gateway and its kinds")
    a.roster.remove(["agent://billing/scorer"])
    wait_until(lambda: b.roster.lives_on("agent://billing/scorer") is None, what="the removal reaching b")


def test_a_silent_host_disappears_after_its_ttl(fleet: tuple[Host, Host, HostKeys]) -> None:
    a, b, _ = fleet
    a.roster.add(["crew://orders"])
    wait_until(lambda: b.roster.lives_on("crew://orders") == a.roster.host, what="b seeing a's crew")
    a.roster.stop()
    wait_until(lambda: b.roster.lives_on("crew://orders") is None, what="a's entry expiring")


def test_a_host_cannot_announce_for_another(fleet: tuple[Host, Host, HostKeys]) -> None:
    a, b, keys = fleet
    body = json.dumps({"round": "r", "chunk": 0, "chunks": 1, "entities": ["agent://billing/stolen"]}).encode()
    headers = Signer(b.roster.host, keys).sign(
        {"message_id": "forged", "from": "x", "to": "roster", "expires_at": _now_ms() + 60_000}, body
    )
    headers["host"] = a.roster.host  # claims to be a, signed with b's key
    b.link.publish(Outgoing(ROSTER_EXCHANGE, f"roster.{a.roster.host}.0", body, "forged", headers)).result(10)
    b.roster.add(["agent://marker/b"])  # a heartbeat of b after the forgery reaches a in order
    b.roster.heartbeat()
    wait_until(lambda: a.roster.lives_on("agent://marker/b") == b.roster.host, what="b's next heartbeat")
    assert a.roster.lives_on("agent://billing/stolen") is None


def test_a_view_two_rounds_after_a_reopen_keeps_the_reopened_entity(fleet: tuple[Host, Host, HostKeys]) -> None:
    """Remove then add again, with heartbeats racing from another thread: once b has
    counted two complete rounds of a since the add, a's entity stays in b's view (no
    round taken before the add may arrive later and drop it)."""
    a, b, _ = fleet
    a.roster.add(["agent://c1/a"])
    wait_until(lambda: b.roster.lives_on("agent://c1/a") == a.roster.host, what="b seeing a's agent")
    for _ in range(20):
        a.roster.remove(["agent://c1/a"])
        rounds = b.roster.rounds_from(a.roster.host)
        a.roster.add(["agent://c1/a"])
        a.roster.heartbeat()
        wait_until(lambda n=rounds: b.roster.rounds_from(a.roster.host) >= n + 2, what="two rounds after the add")
        assert b.roster.lives_on("agent://c1/a") == a.roster.host


def test_a_hosts_own_entries_stay_in_its_view_while_it_heartbeats(fleet: tuple[Host, Host, HostKeys]) -> None:
    """Well past the TTL (1 s; 10 rounds of 0.2 s heard by b), a host still sees its own
    entity and its own gateway with its kinds, as the other host does."""
    a, b, _ = fleet
    a.roster.add(["agent://billing/scorer"])
    host = a.roster.host
    rounds = b.roster.rounds_from(host)
    wait_until(lambda: b.roster.rounds_from(host) >= rounds + 10, timeout=30, what="ten more rounds of a at b")
    assert b.roster.lives_on("agent://billing/scorer") == host
    assert a.roster.lives_on("agent://billing/scorer") == host
    assert a.roster.hosts().get(host) == ("billing",)
