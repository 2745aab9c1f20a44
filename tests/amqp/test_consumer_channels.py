"""Consumers share channels (``orkeon_actors.hub.amqp.consumers``): one connection holds
more consumers than the broker's ``channel_max``, each keeps its own prefetch on a shared
channel, and a consumer the broker refuses leaves its neighbours consuming."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import ExclusiveConsumerError
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import MSG_EXCHANGE, Declarer, inbox_queue, mailbox_key
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.testing import wait_until

from .conftest import ready_count, url
from .fleet import fleet_keys, start_host

pytestmark = pytest.mark.rabbitmq

CHANNEL_MAX = 8
"""Channels the tests' connections may open (pika's ``channel_max`` in the URI)."""


class Received:
    def __init__(self) -> None:
        self.items: list[Delivery] = []
        self._lock = threading.Lock()

    def __call__(self, delivery: Delivery) -> None:
        with self._lock:
            self.items.append(delivery)

    def queues(self) -> set[str]:
        with self._lock:
            return {d.queue for d in self.items}

    def count(self, queue: str) -> int:
        with self._lock:
            return sum(d.queue == queue for d in self.items)


def _boxes(count: int) -> list[MailboxAddress]:
    crew = uuid.uuid4().hex[:8]
    return [MailboxAddress.parse(f"agent://c{crew}/a{index}") for index in range(count)]


def _link(vhost: str, boxes: list[MailboxAddress], **options: int) -> BrokerLink:
    declare = Declarer().shared()
    for box in boxes:
        declare.inbox(box)
    limited = f"{url(vhost)}?channel_max={CHANNEL_MAX}"
    return BrokerLink(limited, name="channels-test", on_connected=declare.run, **options).start()  # type: ignore[arg-type]


def _post(link: BrokerLink, box: MailboxAddress) -> None:
    link.publish(Outgoing(MSG_EXCHANGE, mailbox_key(box), b"{}", uuid.uuid4().hex)).result(10)


@pytest.fixture
def boxes() -> list[MailboxAddress]:
    return _boxes(40)


def test_one_connection_consumes_more_queues_than_its_channel_max(vhost: str, boxes: list[MailboxAddress]) -> None:
    link = _link(vhost, boxes, consumers_per_channel=6)
    try:
        received = Received()
        for box in boxes:  # 40 consumers on a connection allowed 8 channels
            link.consume(inbox_queue(box), received, prefetch=4)
        assert link.consumer_channels == 7  # ceil(40 / 6) shared channels, beside the publishing one
        for box in boxes:
            _post(link, box)
        wait_until(lambda: received.queues() == {inbox_queue(box) for box in boxes}, what="a delivery on every queue")
    finally:
        link.stop()


def test_each_consumer_on_a_shared_channel_keeps_its_own_prefetch(vhost: str) -> None:
    first, second = _boxes(2)
    link = _link(vhost, [first, second])
    try:
        for box in (first, second):
            for _ in range(5):
                _post(link, box)
        held = Received()  # never acknowledges
        link.consume(inbox_queue(first), held, prefetch=2)
        link.consume(inbox_queue(second), held, prefetch=2)
        assert link.consumer_channels == 1
        wait_until(
            lambda: held.count(inbox_queue(first)) == 2 and held.count(inbox_queue(second)) == 2,
            what="two unacknowledged deliveries for each consumer",
        )
        assert ready_count(vhost, inbox_queue(first)) == ready_count(vhost, inbox_queue(second)) == 3
    finally:
        link.stop()


def test_a_refused_consumer_leaves_its_channel_neighbours_consuming(vhost: str) -> None:
    before, locked, after = _boxes(3)
    owner = _link(vhost, [locked])
    link = _link(vhost, [before, locked, after])
    try:
        owner.consume(inbox_queue(locked), Received(), prefetch=1)  # exclusive, on another connection
        received = Received()
        link.consume(inbox_queue(before), received, prefetch=1)
        with pytest.raises(ExclusiveConsumerError, match="consumed exclusively"):
            link.consume(inbox_queue(locked), received, prefetch=1)  # the broker closes the shared channel
        link.consume(inbox_queue(after), received, prefetch=1)
        _post(link, before)
        _post(link, after)
        wait_until(
            lambda: received.queues() == {inbox_queue(before), inbox_queue(after)},
            what="both neighbours still consuming",
        )
    finally:
        link.stop()
        owner.stop()


def test_a_host_keeps_more_inboxes_than_its_connections_channel_max(vhost: str, tmp_path: Path) -> None:
    """A host whose connection may open 8 channels holds 60 mailboxes, each consumed, and
    takes a post from another host into each."""
    suffix = uuid.uuid4().hex[:6]
    a_id, b_id = f"a-{suffix}", f"b-{suffix}"
    keys = fleet_keys([a_id, b_id])
    a = start_host(vhost, a_id, tmp_path / "a.db", keys)
    limited = f"{url(vhost)}?channel_max={CHANNEL_MAX}"
    b = ok.Runtime.start(
        store=str(tmp_path / "b.db"),
        fleet=FleetConfig(limited, b_id, keys, presence_interval=0.2, presence_ttl=3.0),
    )
    try:
        addresses = [str(box) for box in _boxes(60)]
        registrations = b.hub.register_mailboxes(addresses)
        wait_until(lambda: all(a.hub.where(address) == b_id for address in addresses), what="a seeing b's 60")  # type: ignore[attr-defined]
        poster = a.hub.bind("front", "desk")
        for address in addresses:
            poster.post(address, {"to": address})
        wait_until(lambda: all(r.depth() == 1 for r in registrations), timeout=60, what="a post kept in each")
    finally:
        a.stop()
        b.stop()
