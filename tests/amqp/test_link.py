"""The broker link against a real RabbitMQ: confirms, returns, exclusive consumers, the
prefetch bound, dead-lettering, overflow by policy, and reconnects through a proxy."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from orkeon_actors.errors import BrokerNackError, BrokerUnavailableError, ExclusiveConsumerError, UnroutableError
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import DLQ, MSG_EXCHANGE, Declarer, InboxCaps, inbox_queue, mailbox_key
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.testing import wait_until

from .conftest import BROKER, apply_policies, ready_count, url
from .proxy import TcpProxy

pytestmark = pytest.mark.rabbitmq


def _address() -> MailboxAddress:
    return MailboxAddress.parse(f"agent://crew-{uuid.uuid4().hex[:8]}/scorer")


def _link(broker_url: str, *addresses: MailboxAddress) -> BrokerLink:
    declare = Declarer().shared()
    for address in addresses:
        declare.inbox(address)
    return BrokerLink(broker_url, name="test", on_connected=declare.run).start()


def _message(address: MailboxAddress, body: bytes = b"{}", **headers: object) -> Outgoing:
    return Outgoing(MSG_EXCHANGE, mailbox_key(address), body, uuid.uuid4().hex, dict(headers))


class Received:
    def __init__(self) -> None:
        self.items: list[Delivery] = []
        self._lock = threading.Lock()

    def __call__(self, delivery: Delivery) -> None:
        with self._lock:
            self.items.append(delivery)


@pytest.fixture
def box() -> MailboxAddress:
    return _address()


@pytest.fixture
def link(vhost: str, box: MailboxAddress) -> Iterator[BrokerLink]:
    made = _link(url(vhost), box)
    yield made
    made.stop()


def test_a_confirmed_publish_reaches_the_exclusive_consumer(link: BrokerLink, box: MailboxAddress) -> None:
    received = Received()
    link.consume(inbox_queue(box), received, prefetch=10)
    sent = _message(box, b'{"n": 1}', sender="agent://a/b")
    link.publish(sent).result(10)
    wait_until(lambda: len(received.items) == 1, what="the delivery")
    (got,) = received.items
    assert (got.body, got.message_id, got.headers["sender"], got.routing_key) == (
        b'{"n": 1}',
        sent.message_id,
        "agent://a/b",
        mailbox_key(box),
    )
    assert got.redelivered is False
    link.ack(got)


def test_a_mandatory_message_nobody_is_bound_to_is_reported(link: BrokerLink) -> None:
    with pytest.raises(UnroutableError, match="no queue is bound"):
        link.publish(_message(_address())).result(10)


def test_a_second_exclusive_consumer_fails_loudly(vhost: str, link: BrokerLink, box: MailboxAddress) -> None:
    link.consume(inbox_queue(box), Received(), prefetch=1)
    other = _link(url(vhost), box)
    try:
        with pytest.raises(ExclusiveConsumerError, match="consumed exclusively by another connection"):
            other.consume(inbox_queue(box), Received(), prefetch=1)
    finally:
        other.stop()


def test_the_prefetch_bounds_what_is_held_unacknowledged(vhost: str, link: BrokerLink, box: MailboxAddress) -> None:
    for _ in range(20):
        link.publish(_message(box)).result(10)
    received = Received()
    link.consume(inbox_queue(box), received, prefetch=5)
    wait_until(lambda: len(received.items) == 5, what="a full prefetch window")
    assert ready_count(vhost, inbox_queue(box)) == 15  # 20 published, 5 held unacknowledged
    assert len(received.items) == 5
    for delivery in list(received.items):
        link.ack(delivery)
    wait_until(lambda: len(received.items) == 10, what="the next window")


def test_a_rejected_message_is_dead_lettered(vhost: str, link: BrokerLink, box: MailboxAddress) -> None:
    before = ready_count(vhost, DLQ)
    received = Received()
    link.consume(inbox_queue(box), received, prefetch=1)
    link.publish(_message(box, b"poison")).result(10)
    wait_until(lambda: len(received.items) == 1, what="the delivery")
    link.reject(received.items[0])
    wait_until(lambda: ready_count(vhost, DLQ) == before + 1, what="the message in fleet.dlq")


def test_overflow_past_the_policy_cap_is_refused_and_dead_lettered(vhost: str) -> None:
    box = MailboxAddress.parse(f"agent://capped-{uuid.uuid4().hex[:6]}/a")
    apply_policies(vhost, InboxCaps(max_length=3))
    link = _link(url(vhost), box)
    try:
        before = ready_count(vhost, DLQ)
        outcomes = [link.publish(_message(box)) for _ in range(5)]
        errors = [f.exception(10) for f in outcomes]
        assert [e is None for e in errors] == [True, True, True, False, False]
        assert all(isinstance(e, BrokerNackError) for e in errors[3:])
        wait_until(lambda: ready_count(vhost, DLQ) == before + 2, what="the overflow in fleet.dlq")
        assert ready_count(vhost, inbox_queue(box)) == 3
    finally:
        link.stop()


def test_a_lost_connection_reconnects_and_loses_nothing(vhost: str, box: MailboxAddress) -> None:
    proxy = TcpProxy(BROKER)
    declare = Declarer().shared().inbox(box)
    link = BrokerLink(proxy.url(vhost), name="test-proxy", on_connected=declare.run, backoff=0.05).start()
    try:
        received = Received()
        link.consume(inbox_queue(box), received, prefetch=10)
        link.publish(_message(box, b"before")).result(10)
        wait_until(lambda: len(received.items) == 1, what="the first delivery")
        proxy.cut()
        wait_until(lambda: not link.connected, what="the link noticing the cut")
        during = _message(box, b"during")
        with pytest.raises(BrokerUnavailableError, match="did not confirm"):
            link.publish_and_wait(during, timeout=0.5)
        proxy.restore()
        wait_until(lambda: link.connected, timeout=20, what="the reconnect")
        bodies = lambda: sorted(d.body for d in received.items)  # noqa: E731
        wait_until(lambda: b"during" in bodies(), timeout=20, what="the message accepted during the outage")
        assert link.reconnects >= 1
        # the first delivery was never acked: the broker redelivers it on the new connection
        redelivered = [d for d in received.items if d.body == b"before" and d.redelivered]
        assert redelivered, [(d.body, d.redelivered) for d in received.items]
        link.ack(received.items[0])  # a delivery of the old connection: a no-op, not an error
    finally:
        link.stop()
        proxy.close()


def test_an_unreachable_broker_is_a_typed_error_within_the_bound() -> None:
    proxy = TcpProxy(BROKER)
    proxy.cut()
    link = BrokerLink(proxy.url("%2F"), name="test-down")
    try:
        with pytest.raises(BrokerUnavailableError, match=r"did not answer within 0\.5 s"):
            link.start(timeout=0.5)
    finally:
        link.stop()
        proxy.close()


def test_connections_reset_during_the_handshake_are_retried_until_the_broker_is_back() -> None:
    """A peer that accepts the TCP connection, then resets it before pika's handshake
    starts, makes pika raise out of its I/O loop ("getpeername() failed") instead of
    reporting an open error: the link counts it as one more failed attempt and retries,
    it never ends its I/O thread."""
    proxy = TcpProxy(BROKER)
    proxy.cut()  # accepts, then resets every connection
    link = BrokerLink(proxy.url("%2F"), name="test-resets", backoff=0.001, max_backoff=0.002)
    try:
        with pytest.raises(BrokerUnavailableError):
            link.start(timeout=0.2)
        wait_until(lambda: link.attempts >= 300, timeout=60, what="300 connection attempts reset by the peer")
        proxy.restore()
        wait_until(lambda: link.connected, timeout=30, what="the link connected once the peer is back")
    finally:
        link.stop()
        proxy.close()
