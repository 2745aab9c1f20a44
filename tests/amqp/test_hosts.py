"""Hosts in separate processes on the real broker, each with its own store and host id:
spawn on a remote host, a sleeping crew woken from another host, SIGKILL of a host
mid-delivery then restart (nothing accepted lost, nothing kept twice), and an inbox
overflow reported to its sender."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orkeon_actors.fleet.broker_admin import scratch_vhost
from orkeon_actors.fleet.dead_letters import DELIVERY_FAILED
from orkeon_actors.fleet.host_process import HostCallError, HostProcess, write_keys
from orkeon_actors.testing import wait_until

from .conftest import url

pytestmark = pytest.mark.rabbitmq

PRESENCE = (0.3, 6.0)


class Fleet:
    def __init__(self, vhost: str, tmp: Path, names: list[str], inbox_max_length: int | None = None) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.ids = [f"{name}-{suffix}" for name in names]
        keys = tmp / "keys.json"
        write_keys(keys, self.ids)
        self.hosts = [
            HostProcess(
                host,
                tmp / f"{host}.db",
                url=url(vhost),
                keys_file=keys,
                presence=PRESENCE,
                kinds=["forever"],
                inbox_max_length=inbox_max_length,
            )
            for host in self.ids
        ]
        for host in self.hosts:
            host.start()

    def sees(self, observer: HostProcess, host: str, entity: str) -> None:
        wait_until(lambda: [host, entity] in observer.call("roster"), timeout=30, what=f"{entity} on {host}")

    def stop(self) -> None:
        for host in self.hosts:
            host.stop()


@pytest.fixture
def two(vhost: str, tmp_path: Path) -> Iterator[Fleet]:
    fleet = Fleet(vhost, tmp_path, ["a", "b"])
    yield fleet
    fleet.stop()


def test_spawn_on_a_remote_host_then_post_to_the_new_crew(two: Fleet) -> None:
    a, b = two.hosts
    b.call("serve_crews", factories="orkeon_actors.bench.lifecycle:FACTORIES")
    two.sees(a, b.host_id, f"_gateway@{b.host_id}")
    crew = a.call("spawn", within=60, blueprint="forever", host=b.host_id, crew_id="remote-1", timeout=30)
    assert crew == "remote-1"
    assert b.call("crew_state", crew_id=crew) == "ACTIVE"
    a.call("post", to="agent://remote-1/a", payload='{"go": 1}')
    assert b.call("wait_finished", within=60, crew_id=crew, timeout=30) == "COMPLETED"


def test_a_crew_asleep_on_b_is_woken_by_a_post_from_a(two: Fleet) -> None:
    a, b = two.hosts
    b.call("serve_crews", factories="orkeon_actors.bench.lifecycle:FACTORIES")
    crew = b.call("spawn_local", kind="forever", crew_id="sleeper-1")
    assert b.call("sleep_crew", crew_id=crew) is True
    assert b.call("crew_state", crew_id=crew) == "ASLEEP"
    two.sees(a, b.host_id, "agent://sleeper-1/a")
    a.call("post", to="agent://sleeper-1/a", payload='{"wake": 1}')
    assert b.call("wait_finished", within=60, crew_id=crew, timeout=30) == "COMPLETED"


def test_sigkill_of_the_receiving_host_mid_delivery_loses_nothing_and_keeps_nothing_twice(two: Fleet) -> None:
    a, b = two.hosts
    box = "agent://ledger/book"
    b.call("register", address=box)
    two.sees(a, b.host_id, box)
    stream = a.call_async("post_stream", to=box, count=600, crew="billing", agent="scorer")
    wait_until(lambda: b.call("depth", address=box) >= 50, timeout=60, what="b keeping the first posts")
    b.kill()  # mid-delivery: deliveries b held unacknowledged go back to its inbox
    b.restart()
    b.call("register", address=box)
    sent = stream.result(120)
    assert sent["failed"] == []  # b's durable inbox took every post while b was down
    kept = b.call("drain", within=120, address=box, count=len(sent["accepted"]), timeout=60)["ids"]
    assert kept == sent["accepted"]  # every accepted post, once each, in order
    with pytest.raises(HostCallError, match="CancelledError"):
        b.call("receive", address=box, timeout=1)  # and nothing more


def test_an_inbox_overflow_is_reported_to_its_sender(tmp_path: Path) -> None:
    with scratch_vhost("orkeon-test-overflow") as vhost:  # no policy: the hosts cap their inboxes themselves
        fleet = Fleet(vhost, tmp_path, ["a", "b"], inbox_max_length=3)
        try:
            a, b = fleet.hosts
            sender, box = "agent://billing/scorer", "agent://ledger/book"
            a.call("register", address=sender)
            b.call("register", address=box)
            fleet.sees(a, b.host_id, box)
            b.kill()  # nobody consumes b's inbox now: it fills up to its cap
            sent = a.call("post_stream", to=box, count=5, crew="billing", agent="scorer")
            assert len(sent["accepted"]) == 3
            assert [f.split(":")[0] for f in sent["failed"]] == ["BrokerNackError", "BrokerNackError"]
            reports = [a.call("receive", address=sender, timeout=30) for _ in range(2)]
            assert all(DELIVERY_FAILED in r["payload"] and '"reason":"maxlen"' in r["payload"] for r in reports)
            assert [r["source_crew_id"] for r in reports] == ["_system", "_system"]
        finally:
            fleet.stop()
