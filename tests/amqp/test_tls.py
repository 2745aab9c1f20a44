"""TLS as the fleet is told to run (cross-host messaging design, §10.2: ``amqps://`` with
per-host logins), against a TLS listener this module starts on the run's own RabbitMQ
with certificates it makes (``tls_broker.py``): two hosts, each with its own broker user
holding exactly the documented permissions and its own client certificate, post,
confirm, send and reply, and publish across; a broker certificate from another CA is
refused at once with ``BrokerTlsError`` naming the TLS failure."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import BrokerTlsError
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.testing import wait_until

from .fleet import FAST_PRESENCE, documented_names, fleet_keys
from .tls_broker import TlsBroker, make_ca, tls_listener, tls_missing

pytestmark = pytest.mark.rabbitmq

SUFFIX = uuid.uuid4().hex[:6]
A, B = f"tls-a-{SUFFIX}", f"tls-b-{SUFFIX}"
KEYS = fleet_keys([A, B])


@pytest.fixture(scope="module")
def tls(vhost: str) -> Iterator[TlsBroker]:
    missing = tls_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; under CI=true the TLS tests must run")
        pytest.skip(missing)
    with tls_listener(vhost, [A, B], documented_names()) as broker:
        yield broker


def _start(tls: TlsBroker, vhost: str, host: str, store: Path, **uri: Path) -> ok.Runtime:
    fleet = FleetConfig(tls.uri(host, vhost, **uri), host, KEYS, **FAST_PRESENCE)  # type: ignore[arg-type]
    return ok.Runtime.start(store=str(store), fleet=fleet)


def test_two_hosts_with_their_own_logins_work_across_over_amqps(tls: TlsBroker, vhost: str, tmp_path: Path) -> None:
    a = _start(tls, vhost, A, tmp_path / "a.db")
    try:
        b = _start(tls, vhost, B, tmp_path / "b.db")
        try:
            _across(a, b)
        finally:
            b.stop()
    finally:
        a.stop()


def _across(a: ok.Runtime, b: ok.Runtime) -> None:
    assert a.fleet is not None and b.fleet is not None
    assert a.hub.gateway.link.url.startswith("amqps://")  # type: ignore[attr-defined]  # TLS only there
    box = b.hub.register_mailbox("agent://billing/scorer")
    alerts = b.hub.bind("watch", "w").subscribe("alerts.*")
    wait_until(lambda: a.hub.where("agent://billing/scorer") == B, what="a seeing b's mailbox")  # type: ignore[attr-defined]
    client = a.hub.bind("c1", "x")
    posted = client.post("agent://billing/scorer", {"n": 1}, confirm_delivery=True)  # b's receipt came back
    published = client.publish("alerts.fire", 1)
    with box.reader() as reader:
        assert reader.receive().id == posted.id

    def answer() -> None:
        with box.reader() as reader:
            request = reader.receive()
            b.hub.bind("billing", "scorer").reply(request.correlation_id, "pong")

    responder = threading.Thread(target=answer)
    responder.start()
    assert client.send("agent://billing/scorer", "ping", timeout=30).json() == "pong"
    responder.join(30)
    assert alerts.receive(30).id == published.id
    assert a.fleet.dead_letters.stats.by_reason == {} and b.fleet.dead_letters.stats.by_reason == {}


def test_a_broker_certificate_from_another_ca_is_refused_naming_the_tls_failure(
    tls: TlsBroker, vhost: str, tmp_path: Path
) -> None:
    other_ca, _ = make_ca(tmp_path, "not-the-fleet-ca")
    with pytest.raises(
        BrokerTlsError, match=r"TLS handshake .* failed: SSLCertVerificationError: .*certificate verify failed"
    ):
        _start(tls, vhost, A, tmp_path / "wrong.db", cafile=other_ca)
