"""Retained last values reach a host started after they were retained (spec §4, §5 across
hosts): its boot exchange with the live hosts, the newest value of a key winning."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.fleet.host_process import HostProcess, write_keys
from orkeon_actors.fleet.last_value_sync import OP
from orkeon_actors.fleet.signing import HostKeys
from orkeon_actors.testing import wait_until

from .conftest import url
from .fleet import fleet_keys, start_host

pytestmark = pytest.mark.rabbitmq


def _retain(key: str, crew: str | None = None) -> ok.PublishOptions:
    return ok.PublishOptions(target_crew_id=crew, retain_as_last_value=True, last_value_key=key)


class Hosts:
    """Hosts of one fleet on the module's vhost, started and stopped by name."""

    def __init__(self, vhost: str, tmp: Path, names: list[str]) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.vhost, self.tmp = vhost, tmp
        self.ids = {name: f"{name}-{suffix}" for name in names}
        self.keys: HostKeys = fleet_keys(list(self.ids.values()))
        self.running: dict[str, ok.Runtime] = {}

    def start(self, name: str) -> ok.Runtime:
        """Start host ``name`` and wait until its boot exchange of last values finished."""
        host = self.ids[name]
        rt = self.running[name] = start_host(self.vhost, host, self.tmp / f"{host}.db", self.keys)
        assert rt.fleet is not None and rt.fleet.last_values.wait()
        return rt

    def stop(self, name: str) -> None:
        self.running.pop(name).stop()

    def value(self, name: str, key: str, crew: str | None = None) -> object:
        reader = self.running[name].hub.bind(crew or "reader", "r")
        got = reader.get_last_value(key, crew_scope=crew)
        return None if got is None else got.json()

    def close(self) -> None:
        for name in list(self.running):
            self.stop(name)


@pytest.fixture
def hosts(vhost: str, tmp_path: Path) -> Hosts:
    fleet = Hosts(vhost, tmp_path, ["a", "b", "c"])
    yield fleet  # type: ignore[misc]
    fleet.close()


def test_a_host_started_after_a_retain_reads_the_value(hosts: Hosts) -> None:
    a = hosts.start("a")
    a.hub.bind("status", "p").publish("status.changed", {"v": 1}, _retain("status"))
    a.hub.bind("status", "p").publish("status.changed", {"for": "x"}, _retain("status", "x"))
    hosts.start("b")
    assert hosts.value("b", "status") == {"v": 1}
    assert hosts.value("b", "status", crew="x") == {"for": "x"}, "scoped slots cross too"
    assert hosts.value("b", "absent") is None


def test_the_newest_value_wins_when_two_hosts_retained_the_same_key(hosts: Hosts) -> None:
    hosts.start("a").hub.bind("p", "p").publish("s", "old, from a", _retain("k"))
    hosts.stop("a")  # c never hears a's retain
    hosts.start("c").hub.bind("p", "p").publish("s", "new, from c", _retain("k"))
    hosts.stop("c")
    hosts.start("a")  # alone: it still holds its own, older value
    assert hosts.value("a", "k") == "old, from a"
    hosts.start("c")  # c and a exchange: a's older value does not replace c's
    assert hosts.value("c", "k") == "new, from c"
    assert hosts.value("a", "k") == "new, from c", "a learned the newer value from c's boot"
    hosts.start("b")  # both answer b, with the same newest value
    assert hosts.value("b", "k") == "new, from c"


def test_a_read_made_before_the_boot_exchange_finished_waits_for_the_fleets_value(hosts: Hosts) -> None:
    """b reads at once after it started, while a's answer to b's exchange is held: the
    read waits for the exchange and returns a's value (it used to return b's store's
    ``None``)."""
    a = hosts.start("a")
    a.hub.bind("status", "p").publish("status.changed", {"v": 1}, _retain("status"))
    assert a.fleet is not None
    serve, answering = a.fleet.control.ops[OP], threading.Event()
    release = threading.Event()

    def held(host: str, request: dict[str, Any]) -> dict[str, Any]:
        answering.set()
        release.wait(20)
        return serve(host, request)

    a.fleet.control.ops[OP] = held
    try:
        b_id = hosts.ids["b"]
        b = hosts.running["b"] = start_host(hosts.vhost, b_id, hosts.tmp / f"{b_id}.db", hosts.keys)
        assert b.fleet is not None
        sync = b.fleet.last_values
        read: list[object] = []
        reader = threading.Thread(target=lambda: read.append(hosts.value("b", "status")))
        reader.start()
        wait_until(answering.is_set, timeout=20, what="b's exchange reaching a")
        wait_until(lambda: read or sync.reads_held, timeout=20, what="b's read, done or held")
        release.set()
        reader.join(20)
    finally:
        release.set()
    assert read == [{"v": 1}]
    assert sync.reads_held == 1
    assert hosts.value("b", "status") == {"v": 1}  # later reads do not wait
    assert sync.reads_held == 1


def test_a_host_process_started_after_a_retain_reads_it(vhost: str, tmp_path: Path) -> None:
    """The same across host processes (each its own store and broker connection)."""
    suffix = uuid.uuid4().hex[:6]
    names = [f"pa-{suffix}", f"pb-{suffix}"]
    keys_file = tmp_path / "keys.json"
    write_keys(keys_file, names)
    a, b = (
        HostProcess(name, tmp_path / f"{name}.db", url=url(vhost), keys_file=keys_file, presence=(0.2, 3.0))
        for name in names
    )
    try:
        retained = a.start().call("retain", topic="prices.eur", key="eur", payload="1.08")
        b.start()
        wait_until(lambda: b.call("last_value", key="eur") is not None, what="the value on the late host")
        value = b.call("last_value", key="eur")
        assert (value["id"], value["payload"]) == (retained, "1.08")
    finally:
        b.stop()
        a.stop()
