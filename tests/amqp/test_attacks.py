"""Attacks on a fleet, published with pika straight onto the broker as a party holding
broker access or as a compromised host holding one key (cross-host messaging design
§5, §10; ``docs/security.md``): each is refused to ``fleet.dlx``, loudly, and the honest
stream beside it loses nothing and duplicates nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import apsw
import attrs
import pytest

import orkeon_actors as ok
from orkeon_actors.fleet.gateway import SENDER_PREFIX, now_ms
from orkeon_actors.fleet.host_process import HostProcess, write_keys
from orkeon_actors.fleet.hub import AmqpEventHub
from orkeon_actors.hub.amqp.link import Outgoing
from orkeon_actors.hub.amqp.topology import answer_key, mailbox_key, topic_key
from orkeon_actors.hub.port import POST_TOPIC, CallerContext
from orkeon_actors.model.ids import AgentId, CrewId
from orkeon_actors.testing import wait_until
from orkeon_actors.wire import amqp as wire

from .conftest import url
from .fleet import fleet_keys, start_host
from .test_hub import Fleet, dead_lettered, drain_dlq, raw_publish

pytestmark = pytest.mark.rabbitmq

BOX = "agent://billing/scorer"


@pytest.fixture
def fleet(vhost: str, tmp_path: Path) -> Iterator[Fleet]:
    pair = Fleet(vhost, tmp_path)
    try:
        yield pair
    finally:
        pair.stop()


def honest_posts(fleet: Fleet, count: int, tag: str) -> list[str]:
    """``count`` genuine posts from a's ``c1/x`` to :data:`BOX`; their ids."""
    poster = fleet.a.hub.bind("c1", "x")
    return [str(poster.post(BOX, {"tag": tag, "n": n}).id) for n in range(count)]


def read_all(registration: ok.MailboxRegistration, count: int) -> list[str]:
    with registration.reader() as reader:
        return [str(reader.receive().id) for _ in range(count)]


def forged_by_a(fleet: Fleet, *, source: tuple[str, str | None], sender: str) -> Outgoing:
    """A post to :data:`BOX` signed with host a's key (a compromised host's, or its
    operator's), whose body names ``source`` (crew, agent) and whose signed ``from`` is
    ``sender``."""
    hub = fleet.hub_a
    to = ok.MailboxAddress.parse(BOX)
    message = hub.stamp(CallerContext(CrewId("c1"), AgentId("x")), POST_TOPIC, "pay me", None, to.crew_id, to)
    crew, agent = source
    message = attrs.evolve(
        message, source_crew_id=CrewId(crew), source_agent_id=None if agent is None else AgentId(agent)
    )
    key = mailbox_key(to)
    headers, body = wire.encode(message, kind="post", to=key, sender=sender, expires_at_ms=now_ms() + 60_000)
    return Outgoing("fleet.msg", key, body, str(message.id), hub.gateway.signer.sign(headers, body))


def test_a_key_holder_naming_another_hosts_agent_as_source_is_refused(fleet: Fleet) -> None:
    """Host a signs as its own ``c1/x`` (which lives on a by presence) but the body names
    ``billing/auditor``, an agent of host b: the reader and the ACL re-check would see
    the post as the auditor's."""
    registration = fleet.register_on_b(BOX)
    fleet.register_on_b("agent://billing/auditor")
    before = honest_posts(fleet, 3, "before")
    forged = forged_by_a(fleet, source=("billing", "auditor"), sender="agent://c1/x")
    raw_publish(fleet.vhost, forged)
    after = honest_posts(fleet, 3, "after")
    assert dead_lettered(fleet.vhost, forged.message_id)
    assert read_all(registration, 6) == before + after
    assert registration.depth() == 0 and fleet.hub_b.gateway.rejected == 1


def test_a_key_holder_naming_a_crew_level_source_of_its_agent_is_refused(fleet: Fleet) -> None:
    """The signed ``from`` names an agent; the body a crew-level caller of another crew."""
    registration = fleet.register_on_b(BOX)
    honest = honest_posts(fleet, 2, "honest")
    forged = forged_by_a(fleet, source=("billing", None), sender="agent://c1/x")
    raw_publish(fleet.vhost, forged)
    assert dead_lettered(fleet.vhost, forged.message_id)
    assert read_all(registration, 2) == honest
    assert registration.depth() == 0


def captured_post(hub: AmqpEventHub, address: str, payload: object, caller: tuple[str, str] = ("c1", "x")) -> Outgoing:
    """A genuine post by ``caller`` as ``hub``'s gateway signs it: what a wiretapper captures."""
    to = ok.MailboxAddress.parse(address)
    context = CallerContext(CrewId(caller[0]), AgentId(caller[1]))
    message = hub.stamp(context, POST_TOPIC, payload, None, to.crew_id, to)
    return hub.gateway.outgoing(message, kind="post", routing_key=mailbox_key(to), expires_at_ms=now_ms() + 60_000)


@pytest.fixture
def a_and_process_b(vhost: str, tmp_path: Path) -> Iterator[tuple[AmqpEventHub, HostProcess]]:
    """Host a in this process (its key signs the captured traffic), host b a child
    process that a test can SIGKILL and restart on its store."""
    suffix = uuid.uuid4().hex[:6]
    a_id, b_id = f"a-{suffix}", f"b-{suffix}"
    keys_file = tmp_path / "keys.json"
    keys = write_keys(keys_file, [a_id, b_id])
    b = HostProcess(b_id, tmp_path / "b.db", url=url(vhost), keys_file=keys_file, presence=(0.2, 3.0)).start()
    a = start_host(vhost, a_id, tmp_path / "a.db", keys)
    try:
        assert isinstance(a.hub, AmqpEventHub)
        b.call("register", address=BOX)
        wait_until(lambda: a.hub.where(BOX) == b_id, what="a seeing b's inbox")  # type: ignore[attr-defined]
        yield a.hub, b
    finally:
        a.stop()
        b.stop()


def held_ids(store: Path, address: str) -> set[str]:
    """The message ids ``store`` still holds for ``address`` (committed, read-only)."""
    conn = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {
            str(row[0])
            for row in conn.execute("SELECT message_id FROM mailboxes WHERE mailbox_address = ?", (address,))
        }
    finally:
        conn.close()


def test_a_post_replayed_after_the_receiver_was_sigkilled_and_restarted_is_not_delivered_again(
    vhost: str, a_and_process_b: tuple[AmqpEventHub, HostProcess]
) -> None:
    hub_a, b = a_and_process_b
    poster = hub_a.bind("c1", "x")
    captured = captured_post(hub_a, BOX, "pay once")
    raw_publish(vhost, captured)
    assert b.call("receive", address=BOX)["id"] == captured.message_id
    first = str(poster.post(BOX, "honest 1").id)
    assert b.call("receive", address=BOX)["id"] == first  # coming back for it consumed the captured one
    wait_until(lambda: captured.message_id not in held_ids(b.store, BOX), what="its consumption committed")
    b.kill()
    b.restart()
    b.call("register", address=BOX)
    wait_until(lambda: [hub_a.host_id, "sender:agent://c1/x"] in b.call("roster"), what="b hearing a again")
    raw_publish(vhost, captured)  # the exact captured bytes, still within their expiry
    second = str(poster.post(BOX, "honest 2").id)
    got = [b.call("receive", address=BOX)["id"] for _ in range(2)]
    assert got == [first, second]  # the one in hand at the kill again (at least once), never the replay
    assert b.call("depth", address=BOX) == 0


def test_replays_from_a_departed_host_never_stall_the_receivers_other_inboxes(vhost: str, tmp_path: Path) -> None:
    """Genuine messages of host g, captured, replayed after g left the roster: their
    sender's presence cannot be decided now. Each is parked alone and refused when the
    presence window ends; the honest post to another inbox of the same host goes on."""
    suffix = uuid.uuid4().hex[:6]
    a_id, b_id, g_id = f"a-{suffix}", f"b-{suffix}", f"g-{suffix}"
    keys = fleet_keys([a_id, b_id, g_id])
    a = start_host(vhost, a_id, tmp_path / "a.db", keys)
    b = start_host(vhost, b_id, tmp_path / "b.db", keys, presence_ttl=8.0)
    g = start_host(vhost, g_id, tmp_path / "g.db", keys)
    try:
        hub_a, hub_b, hub_g = (runtime.hub for runtime in (a, b, g))
        assert isinstance(hub_a, AmqpEventHub) and isinstance(hub_b, AmqpEventHub) and isinstance(hub_g, AmqpEventHub)
        b.hub.register_mailbox(BOX)
        other = b.hub.register_mailbox("agent://billing/other")
        wait_until(lambda: hub_a.where("agent://billing/other") == b_id, what="a seeing b's inbox")
        captured = [captured_post(hub_g, BOX, n, caller=("g1", "y")) for n in range(3)]
        g.stop()
        wait_until(lambda: all(p.host != g_id for p in hub_b.roster()), timeout=30, what="g gone from b's roster")
        drain_dlq(vhost)
        for replay in captured:
            raw_publish(vhost, replay)
        honest = hub_a.bind("c1", "x").post("agent://billing/other", "honest")
        with other.reader() as reader:
            assert reader.receive().id == honest.id
        refused_so_far = drain_dlq(vhost)
        assert not {r.message_id for r in captured} & set(refused_so_far)  # still parked: nothing waited on them
        refused: list[str] = []
        wait_until(
            lambda: refused.extend(drain_dlq(vhost)) or {r.message_id for r in captured} <= set(refused),
            timeout=30,
            what="the three replays refused to fleet.dlq when the presence window ended",
        )
        assert hub_b.kept_messages(BOX) == []
    finally:
        for runtime in (a, b, g):
            runtime.stop()


def unreported(fleet: Fleet) -> int:
    """Dead letters the two hosts' reporters counted as not reported to their sender."""
    return sum(runtime.fleet.dead_letters.stats.unreported for runtime in (fleet.a, fleet.b) if runtime.fleet)


def test_a_capture_replayed_into_another_inbox_sends_its_honest_sender_no_failure_report(fleet: Fleet) -> None:
    sender_box = fleet.a.hub.register_mailbox("agent://c1/x")  # where a DeliveryFailed would land
    registration = fleet.register_on_b(BOX)
    other = fleet.register_on_b("agent://billing/other")
    captured = captured_post(fleet.hub_a, BOX, "for the scorer")
    raw_publish(fleet.vhost, captured)  # the honest copy, delivered
    raw_publish(fleet.vhost, captured, routing_key=mailbox_key(ok.MailboxAddress.parse("agent://billing/other")))
    assert dead_lettered(fleet.vhost, captured.message_id)
    wait_until(lambda: unreported(fleet) == 1, what="the refusal counted, not reported")
    with registration.reader() as reader:
        assert reader.receive().id == captured.message_id
    assert other.depth() == 0 and sender_box.depth() == 0


def forged(outgoing: Outgoing) -> Outgoing:
    """``outgoing`` with one payload byte changed after signing."""
    body = bytearray(outgoing.body)
    body[-1] ^= 0x01
    return attrs.evolve(outgoing, body=bytes(body))


def test_a_forged_topic_message_is_dead_lettered_as_the_log_says(fleet: Fleet) -> None:
    subscription = fleet.b.hub.bind("watch", "w").subscribe("alerts.*")
    wait_until(lambda: fleet.hub_a.gateway.link.connected, what="a connected")
    hub = fleet.hub_a
    message = hub.stamp(CallerContext(CrewId("c1"), AgentId("x")), "alerts.fire", "real", None, None, None)
    genuine = hub.gateway.outgoing(
        message, kind="topic", routing_key=topic_key("alerts.fire"), expires_at_ms=now_ms() + 60_000
    )
    fake = forged(genuine)
    raw_publish(fleet.vhost, fake)
    assert dead_lettered(fleet.vhost, fake.message_id)
    raw_publish(fleet.vhost, genuine)  # the honest publish beside it still arrives
    assert subscription.receive(30).id == genuine.message_id


def test_a_forged_answer_is_dead_lettered_as_the_log_says(fleet: Fleet) -> None:
    hub = fleet.hub_b
    message = hub.stamp(CallerContext(CrewId("billing"), AgentId("scorer")), "reply", "forged", None, None, None)
    key = answer_key(fleet.a_id)
    genuine = hub.gateway.outgoing(message, kind="answer", routing_key=key, expires_at_ms=now_ms() + 60_000)
    fake = forged(genuine)
    raw_publish(fleet.vhost, fake)
    assert dead_lettered(fleet.vhost, fake.message_id)


def test_a_post_whose_sender_is_announced_late_keeps_its_place_in_its_inbox(fleet: Fleet) -> None:
    """Parking keeps FIFO per inbox: what arrives behind a parked post waits behind it."""
    registration = fleet.register_on_b(BOX)
    honest_posts(fleet, 1, "warm")  # c1/x known to b
    with registration.reader() as reader:
        reader.receive()
    hub = fleet.hub_a
    to = ok.MailboxAddress.parse(BOX)
    message = hub.stamp(CallerContext(CrewId("late"), AgentId("p")), POST_TOPIC, "first", None, to.crew_id, to)
    key = mailbox_key(to)
    headers, body = wire.encode(message, kind="post", to=key, sender="agent://late/p", expires_at_ms=now_ms() + 60_000)
    raw_publish(fleet.vhost, Outgoing("fleet.msg", key, body, str(message.id), hub.gateway.signer.sign(headers, body)))
    behind = honest_posts(fleet, 3, "behind")
    wait_until(lambda: fleet.hub_b.gateway.inbox_deliveries >= 5, what="b holding all four")
    hub.gateway.roster.add([SENDER_PREFIX + "agent://late/p"])  # its announcement, late
    hub.gateway.roster.heartbeat()
    assert read_all(registration, 4) == [str(message.id), *behind]
