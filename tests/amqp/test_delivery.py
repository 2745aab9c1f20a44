"""Delivery correctness across two hosts on the real broker, each reaching it through a
loopback proxy: a post made with ``confirm_delivery=True`` returns once the recipient's
host holds it, or fails fast and typed when that host is stalled (the message still
arrives); a post the link republishes after a reconnect (the broker had taken it, its
confirm was lost) reaches its recipient once and is never reported to its sender as a
failure."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import DeliveryNotConfirmedError, InvalidArgumentError
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.fleet.hub import AmqpEventHub
from orkeon_actors.hub.amqp.link import Outgoing
from orkeon_actors.model.message import Message
from orkeon_actors.testing import wait_until

from .conftest import BROKER
from .fleet import FAST_PRESENCE, fleet_keys
from .proxy import TcpProxy

pytestmark = pytest.mark.rabbitmq

BOX = "agent://ledger/book"
SENDER = "agent://billing/scorer"


def hub(runtime: ok.Runtime) -> AmqpEventHub:
    assert isinstance(runtime.hub, AmqpEventHub)
    return runtime.hub


class Pair:
    """Host A (through ``proxy``, with a mailbox for its sender's reports) and host B
    (through ``proxy_b``, holding :data:`BOX`)."""

    def __init__(self, vhost: str, tmp: Path, *, delivery_timeout: float = 1.0) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.a_id, self.b_id = f"a-{suffix}", f"b-{suffix}"
        keys = fleet_keys([self.a_id, self.b_id])
        self.proxy, self.proxy_b = TcpProxy(BROKER), TcpProxy(BROKER)
        config = FleetConfig(
            self.proxy.url(vhost),
            self.a_id,
            keys,
            publish_timeout=60.0,
            delivery_timeout=delivery_timeout,
            **FAST_PRESENCE,  # type: ignore[arg-type]
        )
        self.a = ok.Runtime.start(store=str(tmp / "a.db"), fleet=config)
        config_b = FleetConfig(self.proxy_b.url(vhost), self.b_id, keys, **FAST_PRESENCE)  # type: ignore[arg-type]
        self.b = ok.Runtime.start(store=str(tmp / "b.db"), fleet=config_b)
        self.sender = self.a.hub.register_mailbox(SENDER)
        self.box = self.b.hub.register_mailbox(BOX)
        self.routable()
        self.poster = self.a.hub.bind("billing", "scorer")

    def routable(self) -> None:
        wait_until(lambda: hub(self.a).where(BOX) == self.b_id, timeout=20, what="a seeing b's mailbox")
        wait_until(lambda: hub(self.b).where(SENDER) == self.a_id, timeout=20, what="b seeing a's sender")

    def stop(self) -> None:
        self.a.stop()
        self.b.stop()
        self.proxy.close()
        self.proxy_b.close()


@pytest.fixture
def pair(vhost: str, tmp_path: Path) -> Iterator[Pair]:
    made = Pair(vhost, tmp_path)
    yield made
    made.stop()


def test_a_post_republished_after_a_lost_confirm_arrives_once_and_is_not_reported(pair: Pair) -> None:
    link = hub(pair.a).gateway.link
    reconnects = link.reconnects
    gateway_b = hub(pair.b).gateway
    pair.proxy.stall_from_broker()  # the publish reaches the broker, its confirm never comes back
    posted: Future[Message] = Future()

    def post() -> None:
        try:
            posted.set_result(pair.poster.post(BOX, b"once"))
        except BaseException as exc:
            posted.set_exception(exc)

    threading.Thread(target=post, daemon=True).start()
    with pair.box.reader() as reader:
        first = reader.receive()  # b kept and acknowledged the first copy
        assert first.payload == b"once"
        assert not posted.done()  # a still waits for the confirm
        pair.proxy.cut()  # the connection drops with the publish unconfirmed
        pair.proxy.restore()
        wait_until(lambda: link.reconnects > reconnects, timeout=30, what="a reconnecting")
        assert posted.result(30).id == first.id  # republished after the reconnect, confirmed then
        wait_until(lambda: gateway_b.duplicates == 1, timeout=30, what="b dropping the republished copy")
        pair.routable()
        pair.poster.post(BOX, b"after")
        assert reader.receive().payload == b"after"  # no second "once" before it (FIFO per inbox)
    assert pair.box.depth() == 0
    assert gateway_b.rejected == 0  # nothing dead-lettered, so no DeliveryFailed can be on its way
    assert pair.sender.depth() == 0


def test_a_confirmed_post_returns_once_the_recipients_host_holds_it(pair: Pair) -> None:
    posted = pair.poster.post(BOX, b"held", confirm_delivery=True)
    assert pair.box.depth() == 1  # kept by b's store before b confirmed it: no wait needed
    assert len(hub(pair.a).gateway.receipts) == 0  # nothing left waiting
    with pair.box.reader() as reader:
        assert reader.receive().id == posted.id
    with pytest.raises(InvalidArgumentError, match="no single recipient confirms a broadcast"):
        pair.poster.post("topic://ledger.events", b"{}", confirm_delivery=True)


def test_a_confirmed_post_to_a_stalled_host_fails_fast_and_still_arrives(pair: Pair) -> None:
    pair.proxy_b.stall()  # b's connection stays open, nothing flows: its heartbeats hold its presence a while
    began = time.monotonic()
    with pytest.raises(DeliveryNotConfirmedError, match=f"host '{pair.b_id}' did not confirm holding it") as error:
        pair.poster.post(BOX, b"late", confirm_delivery=True)
    # the bound is delivery_timeout (1 s here), far below a send timeout or the publish timeout (60 s)
    assert time.monotonic() - began < 30
    assert error.value.recipient == BOX and error.value.host == pair.b_id
    assert len(hub(pair.a).gateway.receipts) == 0
    pair.proxy_b.restore()
    with pair.box.reader() as reader:  # not lost: the broker kept it in b's inbox
        late = reader.receive()
    assert late.id == error.value.message_id and late.payload == b"late"


def test_a_confirmed_send_to_a_stalled_host_fails_fast_instead_of_timing_out(pair: Pair) -> None:
    pair.proxy_b.stall()
    with pytest.raises(DeliveryNotConfirmedError, match="did not confirm holding it"):
        pair.poster.send(BOX, b"ask", timeout=60, confirm_delivery=True)  # raised long before 60 s
    pair.proxy_b.restore()
    with pair.box.reader() as reader:
        request = reader.receive()  # it still arrives
    assert request.payload == b"ask" and request.correlation_id is not None
    assert not pair.a.hub.is_active_correlation(request.correlation_id)  # the requester gave up at once


def test_a_receipt_sent_while_the_posters_connection_is_down_confirms_the_post_after_its_reconnect(
    vhost: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker confirmed the post; a's connection drops; b holds the post and sends its
    DELIVERED receipt while a is away; a reconnects within its delivery_timeout: the post
    returns confirmed. (The receipt used to go to a's exclusive answers queue, gone with
    the connection: the post raised a false DeliveryNotConfirmedError.)"""
    pair = Pair(vhost, tmp_path, delivery_timeout=30.0)
    try:
        link = hub(pair.a).gateway.link
        reconnects = link.reconnects
        confirmed_by_broker = threading.Event()
        receipts = hub(pair.a).gateway.receipts
        wait = receipts.wait

        def waiting(message_id: str, recipient: str, timeout: float) -> object:
            confirmed_by_broker.set()  # publish() returned: the broker confirmed the post
            return wait(message_id, recipient, timeout)

        monkeypatch.setattr(receipts, "wait", waiting)
        sent: list[Future[None]] = []
        link_b = hub(pair.b).gateway.link
        publish_b = link_b.publish

        def publishing(outgoing: Outgoing) -> Future[None]:
            future = publish_b(outgoing)
            if outgoing.routing_key.endswith(pair.a_id) and not outgoing.routing_key.startswith("mbox."):
                sent.append(future)  # b's receipt for a
            return future

        monkeypatch.setattr(link_b, "publish", publishing)
        pair.proxy_b.stall()  # b takes nothing yet
        posted: Future[Message] = Future()

        def post() -> None:
            try:
                posted.set_result(pair.poster.post(BOX, b"held", confirm_delivery=True))
            except BaseException as exc:
                posted.set_exception(exc)

        threading.Thread(target=post, daemon=True).start()
        wait_until(confirmed_by_broker.is_set, timeout=20, what="the broker confirming a's post")
        pair.proxy.cut()  # a's connection drops before any receipt came
        pair.proxy_b.restore()  # b holds the post now and sends its receipt while a is away
        wait_until(lambda: pair.box.depth() == 1, timeout=20, what="b holding the post")
        wait_until(lambda: bool(sent) and sent[0].done(), timeout=20, what="b's receipt taken by the broker")
        assert sent[0].exception() is None
        assert not posted.done()
        pair.proxy.restore()
        wait_until(lambda: link.reconnects > reconnects, timeout=30, what="a reconnecting")
        message = posted.result(30)  # confirmed, no DeliveryNotConfirmedError
        assert message.payload == b"held"
        assert len(receipts) == 0
        with pair.box.reader() as reader:
            assert reader.receive().id == message.id
    finally:
        pair.stop()
