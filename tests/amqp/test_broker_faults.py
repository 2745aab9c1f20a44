"""Broker faults seen by a fleet host, injected with a loopback proxy between host A and the
broker (cut, stall, reset), never by stopping the machine's broker: a post made while the
broker is unreachable raises BrokerUnavailableError within its bound; once the broker is
back the host reconnects, redeclares its slice, and what it had accepted is delivered once."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger

import orkeon_actors as ok
from orkeon_actors.errors import BrokerUnavailableError
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.fleet.hub import AmqpEventHub
from orkeon_actors.hub.amqp.link import Delivery
from orkeon_actors.testing import wait_until

from .conftest import BROKER
from .fleet import FAST_PRESENCE, fleet_keys, start_host
from .proxy import TcpProxy

pytestmark = pytest.mark.rabbitmq

BOX = "agent://ledger/book"


class Faulty:
    """Host A reaches the broker through ``proxy``; host B directly."""

    def __init__(self, vhost: str, tmp: Path) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.a_id, self.b_id = f"a-{suffix}", f"b-{suffix}"
        keys = fleet_keys([self.a_id, self.b_id])
        self.proxy = TcpProxy(BROKER)
        config = FleetConfig(self.proxy.url(vhost), self.a_id, keys, publish_timeout=1.0, **FAST_PRESENCE)  # type: ignore[arg-type]
        self.a = ok.Runtime.start(store=str(tmp / "a.db"), fleet=config)
        self.b = start_host(vhost, self.b_id, tmp / "b.db", keys)
        self.box = self.b.hub.register_mailbox(BOX)
        wait_until(lambda: self.hub_a.where(BOX) == self.b_id, what="a seeing b's mailbox")
        self.poster = self.a.hub.bind("billing", "scorer")

    @property
    def hub_a(self) -> AmqpEventHub:
        assert isinstance(self.a.hub, AmqpEventHub)
        return self.a.hub

    def received(self, count: int) -> list[bytes]:
        with self.box.reader() as reader:
            return [reader.receive().payload for _ in range(count)]

    def reconnected(self, before: int) -> None:
        link = self.hub_a.gateway.link
        wait_until(lambda: link.connected and link.reconnects > before, timeout=30, what="a reconnecting")

    def stop(self) -> None:
        self.a.stop()
        self.b.stop()
        self.proxy.close()


@pytest.fixture
def faulty(vhost: str, tmp_path: Path) -> Iterator[Faulty]:
    made = Faulty(vhost, tmp_path)
    yield made
    made.stop()


def test_a_post_while_the_broker_is_cut_off_fails_within_its_bound_then_arrives_once(faulty: Faulty) -> None:
    faulty.poster.post(BOX, b"before")
    link = faulty.hub_a.gateway.link
    reconnects = link.reconnects
    faulty.proxy.cut()
    wait_until(lambda: not link.connected, what="a noticing the cut")
    began = time.monotonic()
    with pytest.raises(BrokerUnavailableError, match="did not confirm"):
        faulty.poster.post(BOX, b"during")
    assert time.monotonic() - began < 10  # the bound is the publish timeout, not a hang
    faulty.proxy.restore()
    faulty.reconnected(reconnects)
    faulty.poster.post(BOX, b"after")
    # "during" was kept by the link and published on reconnect: delivered once, in order
    assert faulty.received(3) == [b"before", b"during", b"after"]
    assert faulty.box.depth() == 0


def test_after_a_reset_the_host_redeclares_its_slice_and_keeps_its_presence(faulty: Faulty) -> None:
    link = faulty.hub_a.gateway.link
    reconnects = link.reconnects
    faulty.proxy.cut()  # a reset: every connection aborted, then the network is back at once
    faulty.proxy.restore()
    faulty.reconnected(reconnects)
    back = int(time.time() * 1000)
    # a's exclusive roster queue went with the old connection: only a redeclared one gets
    # b's heartbeats, and only a's redeclared consumers get deliveries
    ttl_ms = int(FAST_PRESENCE["presence_ttl"] * 1000)
    wait_until(
        lambda: any(p.entity == BOX and p.expires_at > back + ttl_ms // 2 for p in faulty.hub_a.roster()),
        timeout=30,
        what="b's presence refreshed on a after the reconnect",
    )
    mine = faulty.a.hub.register_mailbox("agent://billing/inbox")
    wait_until(lambda: faulty.b.hub.where("agent://billing/inbox") == faulty.a_id, what="a announcing again")  # type: ignore[attr-defined]
    faulty.b.hub.bind("ledger", "book").post("agent://billing/inbox", b"to a")
    with mine.reader() as reader:
        assert reader.receive().payload == b"to a"


def test_a_stalled_connection_fails_the_post_in_time_and_delivers_it_once_it_flows(faulty: Faulty) -> None:
    faulty.proxy.stall()
    with pytest.raises(BrokerUnavailableError, match="did not confirm"):
        faulty.poster.post(BOX, b"stalled")
    faulty.proxy.restore()
    faulty.poster.post(BOX, b"flowing")
    assert faulty.received(2) == [b"stalled", b"flowing"]


def test_a_consumed_post_redelivered_after_a_cut_does_not_reach_its_reader_again(faulty: Faulty) -> None:
    """A's ack of a post it kept is lost with the connection (the broker redelivers it,
    marked redelivered) while the reader had consumed it already: read once."""
    hub_a = faulty.hub_a
    box = faulty.a.hub.register_mailbox("agent://ledger/copy")
    wait_until(lambda: faulty.b.hub.where("agent://ledger/copy") == faulty.a_id, what="b seeing a's mailbox")  # type: ignore[attr-defined]
    poster = faulty.b.hub.bind("billing", "clerk")
    link = hub_a.gateway.link
    acks = link.ack
    lost: list[str] = []

    def ack_lost_for_first(delivery: Delivery) -> None:
        if delivery.body.endswith(b"\nonce") and not lost:
            lost.append(delivery.message_id or "")  # the ack the cut will lose
            return
        acks(delivery)

    link.ack = ack_lost_for_first  # type: ignore[method-assign]
    first = poster.post("agent://ledger/copy", b"once")
    with box.reader() as reader:
        got = reader.receive()
        second = poster.post("agent://ledger/copy", b"twice?")
        assert [got.id, reader.receive().id] == [first.id, second.id]  # coming back consumed the first
    wait_until(lambda: bool(lost), what="the first post's ack withheld")
    link.ack = acks  # type: ignore[method-assign]
    reconnects = link.reconnects
    faulty.proxy.cut()
    faulty.proxy.restore()
    faulty.reconnected(reconnects)
    wait_until(lambda: hub_a.gateway.duplicates >= 1, what="the redelivery dropped as a duplicate")
    third = poster.post("agent://ledger/copy", b"after")
    with box.reader() as reader:
        assert reader.receive().id == third.id
    assert box.depth() == 0


def test_an_outage_longer_than_the_presence_window_is_an_unavailable_broker_not_a_missing_mailbox(
    faulty: Faulty,
) -> None:
    faulty.poster.post(BOX, b"before")
    link = faulty.hub_a.gateway.link
    reconnects = link.reconnects
    faulty.proxy.cut()
    wait_until(lambda: not link.connected, what="a noticing the cut")
    wait_until(lambda: faulty.hub_a.where(BOX) is None, timeout=30, what="b's presence expiring in a's view")
    with pytest.raises(BrokerUnavailableError, match="the broker is unreachable and presence is heard through it"):
        faulty.poster.post(BOX, b"during")
    faulty.proxy.restore()
    faulty.reconnected(reconnects)
    faulty.poster.post(BOX, b"after")  # the view refills within the settle window: found, not refused
    assert faulty.received(2) == [b"before", b"after"]


def test_heartbeats_taken_during_an_outage_are_not_published_late(faulty: Faulty) -> None:
    hub_b = faulty.b.hub
    assert isinstance(hub_b, AmqpEventHub)
    link = faulty.hub_a.gateway.link
    reconnects = link.reconnects
    refused: list[str] = []
    sink = logger.add(lambda m: refused.append(str(m)), level="WARNING", filter=lambda r: "presence" in r["message"])
    try:
        faulty.proxy.cut()
        wait_until(lambda: not link.connected, what="a noticing the cut")
        rounds = hub_b.gateway.roster.rounds_from(faulty.a_id)
        wait_until(lambda: faulty.hub_a.where(BOX) is None, timeout=30, what="an outage past the presence TTL")
        attempts = link.attempts
        wait_until(lambda: link.attempts >= attempts + 2, timeout=30, what="a's first heartbeats of it expired")
        faulty.proxy.restore()
        faulty.reconnected(reconnects)
        wait_until(lambda: hub_b.gateway.roster.rounds_from(faulty.a_id) >= rounds + 2, what="fresh rounds from a")
    finally:
        logger.remove(sink)
    assert refused == []
