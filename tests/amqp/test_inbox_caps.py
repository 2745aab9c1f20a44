"""Inbox caps applied by the hosts themselves: every inbox a host declares carries its
cap arguments; an inbox found declared otherwise is said at WARNING (which inbox, what
the broker found, the command that fixes it) and keeps working, without the link
reconnecting; ``orkeon fleet caps --apply`` (``recap``) redeclares an unconsumed one with
its messages, after which the host no longer warns."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pika
import pika.exceptions
import pytest
from loguru import logger

import orkeon_actors as ok
from orkeon_actors.fleet.inbox_caps import Recapped, recap
from orkeon_actors.fleet.signing import HostKeys
from orkeon_actors.hub.amqp.topology import DLX, MSG_EXCHANGE, InboxCaps, inbox_arguments
from orkeon_actors.testing import wait_until

from .conftest import url
from .fleet import fleet_keys, start_host

pytestmark = pytest.mark.rabbitmq

OLD_ARGUMENTS = {"x-queue-type": "classic", "x-dead-letter-exchange": DLX}
"""What hosts declared their inboxes with before they capped them."""


@contextlib.contextmanager
def _channel(vhost: str) -> Iterator[pika.adapters.blocking_connection.BlockingChannel]:
    with contextlib.closing(pika.BlockingConnection(pika.URLParameters(url(vhost)))) as connection:
        yield connection.channel()


def declared_with(vhost: str, queue: str, caps: InboxCaps) -> bool:
    """Whether ``queue`` exists with exactly ``caps``' arguments: AMQP redeclares a queue
    only with equivalent ones (a check without ``rabbitmqctl``, which takes seconds)."""
    with _channel(vhost) as channel:
        channel.queue_declare(queue, passive=True)  # it exists (else: ChannelClosedByBroker 404)
        try:
            channel.queue_declare(queue, durable=True, arguments=inbox_arguments(caps))
        except pika.exceptions.ChannelClosedByBroker as exc:
            assert exc.reply_code == 406, exc
            return False
        return True


@contextlib.contextmanager
def _warnings() -> Iterator[list[str]]:
    said: list[str] = []
    sink = logger.add(lambda m: said.append(str(m)), level="WARNING", filter=lambda r: "caps" in r["message"])
    try:
        yield said
    finally:
        logger.remove(sink)


def test_a_host_declares_every_inbox_with_its_caps(vhost: str, tmp_path: Path) -> None:
    host = f"capped-{uuid.uuid4().hex[:6]}"
    runtime = start_host(vhost, host, tmp_path / "h.db", fleet_keys([host]))
    try:
        runtime.hub.register_mailbox(f"agent://{host}/a")
        assert declared_with(vhost, f"inbox.agent://{host}/a", InboxCaps())  # no policy needed
        assert not declared_with(vhost, f"inbox.agent://{host}/a", InboxCaps(max_length=99_999))
    finally:
        runtime.stop()


CAPS = InboxCaps(max_length=2)
"""The fleet's caps in the test below (small: recapping dead-letters what is over them)."""


def test_an_uncapped_inbox_is_said_keeps_working_and_is_fixed_by_caps_apply(vhost: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    a_id, b_id = f"a-{suffix}", f"b-{suffix}"
    keys = fleet_keys([a_id, b_id])
    old, new = f"agent://old-{suffix}/a", f"agent://new-{suffix}/a"
    with _channel(vhost) as channel:  # an inbox an older host made
        channel.queue_declare(f"inbox.{old}", durable=True, arguments=OLD_ARGUMENTS)
    a = start_host(vhost, a_id, tmp_path / "a.db", keys, inbox_caps=CAPS)
    try:
        _uncapped_then_fixed(vhost, a, b_id, keys, old, new, tmp_path)
    finally:
        a.stop()


def _uncapped_then_fixed(
    vhost: str, a: ok.Runtime, b_id: str, keys: HostKeys, old: str, new: str, tmp_path: Path
) -> None:
    b = start_host(vhost, b_id, tmp_path / "b.db", keys, inbox_caps=CAPS)
    try:
        with _warnings() as said:
            old_box = b.hub.register_mailbox(old)
            b.hub.register_mailbox(new)
        assert len(said) == 1, said
        assert f"inbox inbox.{old} exists without this host's caps" in said[0]
        assert "inequivalent arg" in said[0] and "current is none" in said[0]  # what the broker found
        assert "orkeon fleet caps --apply" in said[0]
        assert list(b.hub.gateway.uncapped) == [f"inbox.{old}"]
        assert b.hub.gateway.link.reconnects == 0  # the working channel was not touched
        assert declared_with(vhost, f"inbox.{new}", CAPS)  # the others are capped

        wait_until(lambda: a.hub.where(old) == b_id, what="a seeing b's old mailbox")  # type: ignore[attr-defined]
        posted = a.hub.bind("c", "x").post(old, {"n": 1}, confirm_delivery=True)
        with old_box.reader() as reader:
            assert reader.receive().id == posted.id
    finally:
        b.stop()
    kept = _an_old_inbox_holding_three(vhost)
    done = recap(url(vhost), vhost, CAPS)  # orkeon fleet caps --apply, b stopped
    assert f"inbox.{old}" in done.redeclared and done.in_use == []
    assert declared_with(vhost, f"inbox.{old}", CAPS)
    _kept_in_order_and_still_bound(vhost, kept, done)
    try:
        with _warnings() as said:
            b = start_host(vhost, b_id, tmp_path / "b.db", keys, inbox_caps=CAPS)  # reopens its mailboxes
            b.hub.register_mailbox(old)
        assert said == [] and b.hub.gateway.uncapped == {}
    finally:
        b.stop()


def _an_old_inbox_holding_three(vhost: str) -> str:
    """An inbox made by an older host, bound to its key, holding three messages."""
    queue = f"inbox.agent://kept-{uuid.uuid4().hex[:6]}/a"
    with _channel(vhost) as channel:
        channel.queue_declare(queue, durable=True, arguments=OLD_ARGUMENTS)
        channel.queue_bind(queue, MSG_EXCHANGE, "mbox." + queue.removeprefix("inbox."))
        channel.confirm_delivery()
        for n in range(3):
            properties = pika.BasicProperties(message_id=f"m{n}", headers={"x-orkeon-sig": f"s{n}"})
            channel.basic_publish("", queue, f"body {n}".encode(), properties, mandatory=True)
    return queue


def _kept_in_order_and_still_bound(vhost: str, queue: str, done: Recapped) -> None:
    """Recapped: the policy capped it first (the oldest message over the cap
    dead-lettered by the broker), the rest moved back in order, unchanged, its binding
    kept."""
    assert done.redeclared[queue] == 2 and queue not in done.dead_lettered
    assert declared_with(vhost, queue, CAPS)
    with _channel(vhost) as channel:
        kept = [channel.basic_get(queue, auto_ack=True) for _ in range(2)]
        assert [(p.message_id, p.headers, body) for _, p, body in kept] == [
            ("m1", {"x-orkeon-sig": "s1"}, b"body 1"),
            ("m2", {"x-orkeon-sig": "s2"}, b"body 2"),
        ]
        channel.confirm_delivery()
        key = "mbox." + queue.removeprefix("inbox.")
        channel.basic_publish(MSG_EXCHANGE, key, b"after", mandatory=True)  # still bound (else: UnroutableError)
        assert channel.queue_declare(queue, passive=True).method.message_count == 1
