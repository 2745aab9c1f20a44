"""The control plane across two gateways on the real broker: a spawn runs on the target
host and answers with the crew id; a refusal comes back typed; an unverifiable request is
dead-lettered; a host that does not answer times out within the bound."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator

import pytest

from orkeon_actors.errors import FleetControlError, FleetTimeoutError, InvalidArgumentError
from orkeon_actors.fleet.control import ControlPlane
from orkeon_actors.fleet.signing import HostKeys, Signer, Verifier
from orkeon_actors.hub.amqp.link import BrokerLink, Outgoing
from orkeon_actors.hub.amqp.topology import CONTROL_EXCHANGE, DLQ, Declarer
from orkeon_actors.testing import wait_until

from .conftest import ready_count, url

pytestmark = pytest.mark.rabbitmq


def _now_ms() -> int:
    return int(time.time() * 1000)


class Host:
    def __init__(self, vhost: str, name: str, keys: HostKeys) -> None:
        self.spawned: list[tuple[str, str | None]] = []
        self.stopped: list[str] = []
        self.link = BrokerLink(url(vhost), name=name, on_connected=Declarer().shared().control(name).run).start()
        self.control = ControlPlane(
            name,
            self.link,
            Signer(name, keys),
            Verifier(keys, lambda _sender: None, _now_ms),
            spawn=self._spawn,
            stop=lambda crew_id, _requester: self.stopped.append(crew_id),
        ).start()

    def _spawn(self, blueprint: str, crew_id: str | None) -> str:
        if blueprint == "unknown":
            raise InvalidArgumentError("no factory registered for blueprint 'unknown'")
        self.spawned.append((blueprint, crew_id))
        return crew_id or f"{blueprint}-1"


@pytest.fixture
def hosts(vhost: str) -> Iterator[tuple[Host, Host, HostKeys]]:
    suffix = uuid.uuid4().hex[:6]
    a, b = f"host-a-{suffix}", f"host-b-{suffix}"
    keys = HostKeys({a: secrets.token_bytes(32), b: secrets.token_bytes(32), "host-off": secrets.token_bytes(32)})
    host_a, host_b = Host(vhost, a, keys), Host(vhost, b, keys)
    yield host_a, host_b, keys
    host_a.link.stop()
    host_b.link.stop()


def test_spawn_runs_on_the_target_host_and_returns_the_crew_id(hosts: tuple[Host, Host, HostKeys]) -> None:
    a, b, _ = hosts
    assert a.control.spawn(b.control.host, "billing", "billing-7", timeout=10) == "billing-7"
    assert b.spawned == [("billing", "billing-7")] and a.spawned == []
    assert a.control.stop(b.control.host, "billing-7", timeout=10) == "billing-7"
    assert b.stopped == ["billing-7"]


def test_a_refusal_comes_back_typed(hosts: tuple[Host, Host, HostKeys]) -> None:
    a, b, _ = hosts
    with pytest.raises(FleetControlError, match="refused spawn: InvalidArgumentError: no factory registered"):
        a.control.spawn(b.control.host, "unknown", timeout=10)


def test_a_host_that_does_not_answer_times_out_within_the_bound(vhost: str, hosts: tuple[Host, Host, HostKeys]) -> None:
    a, _, _ = hosts
    off = BrokerLink(url(vhost), name="off", on_connected=Declarer().shared().control("host-off").run).start()
    off.stop()  # its durable control queue exists, nobody serves it
    with pytest.raises(FleetTimeoutError, match=r"did not answer spawn within 0\.5 s"):
        a.control.spawn("host-off", "billing", timeout=0.5)


def test_an_unsigned_request_is_dead_lettered(vhost: str, hosts: tuple[Host, Host, HostKeys]) -> None:
    a, b, keys = hosts
    before = ready_count(vhost, DLQ)
    headers = Signer(a.control.host, keys).sign(
        {
            "message_id": "x",
            "from": f"control://{a.control.host}",
            "to": f"control://{b.control.host}",
            "expires_at": _now_ms() + 60_000,
        },
        b'{"op":"spawn","blueprint":"billing"}',
    )
    tampered = b'{"op":"spawn","blueprint":"evil"}'
    a.link.publish(Outgoing(CONTROL_EXCHANGE, b.control.host, tampered, "x", headers)).result(10)
    wait_until(lambda: ready_count(vhost, DLQ) == before + 1, what="the forged request in fleet.dlq")
    assert b.spawned == []


def test_a_replayed_spawn_request_does_not_start_a_second_crew(hosts: tuple[Host, Host, HostKeys]) -> None:
    """A captured, validly signed spawn replayed within its expiry: served once."""
    a, b, keys = hosts
    body = b'{"op":"spawn","blueprint":"billing","crew_id":null}'
    headers = Signer(a.control.host, keys).sign(
        {
            "message_id": uuid.uuid4().hex,
            "from": f"control://{a.control.host}",
            "to": f"control://{b.control.host}",
            "expires_at": _now_ms() + 30_000,
            "reply_to": a.control.host,
        },
        body,
    )
    captured = Outgoing(CONTROL_EXCHANGE, b.control.host, body, str(headers["message_id"]), headers)
    a.link.publish(captured).result(10)
    wait_until(lambda: len(b.spawned) == 1, what="the genuine spawn served")
    a.link.publish(captured).result(10)  # the replay, within the request's expiry
    assert a.control.spawn(b.control.host, "audit", timeout=10) == "audit-1"  # the honest request behind it
    assert b.spawned == [("billing", None), ("audit", None)]
