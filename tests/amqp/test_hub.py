"""Two hosts of a fleet in one process, on the real broker: what a user relies on when
its crews live on different hosts (spec §17; cross-host messaging design §2, §6)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import pika
import pytest
from loguru import logger

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink, RestrictiveCrewLinkPolicy
from orkeon_actors.crew import Agent, CrewStatus, ScriptedModel, call, respond
from orkeon_actors.errors import MailboxNotFoundError, SendTimeoutError
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.fleet.gateway import SENDER_PREFIX, now_ms
from orkeon_actors.fleet.hub import AmqpEventHub
from orkeon_actors.fleet.signing import SIGNATURE_HEADER, HostKeys
from orkeon_actors.hub.amqp.link import Outgoing
from orkeon_actors.hub.amqp.topology import DLQ, MSG_EXCHANGE, answer_key, mailbox_key
from orkeon_actors.hub.port import POST_TOPIC, REPLY_TOPIC, CallerContext
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor, LifecycleState
from orkeon_actors.model.ids import AgentId, CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until
from orkeon_actors.wire import amqp as wire

from .conftest import BROKER, url
from .fleet import fleet_keys, start_host
from .proxy import TcpProxy

pytestmark = pytest.mark.rabbitmq


class Fleet:
    """Hosts ``a`` and ``b`` (unique ids per test) on the module's vhost."""

    def __init__(self, vhost: str, tmp: Path, **b_options: object) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.vhost = vhost
        self.a_id, self.b_id = f"a-{suffix}", f"b-{suffix}"
        self.keys: HostKeys = fleet_keys([self.a_id, self.b_id])
        self.a = start_host(vhost, self.a_id, tmp / "a.db", self.keys)
        self.b = start_host(vhost, self.b_id, tmp / "b.db", self.keys, **b_options)  # type: ignore[arg-type]

    @property
    def hub_a(self) -> AmqpEventHub:
        assert isinstance(self.a.hub, AmqpEventHub)
        return self.a.hub

    @property
    def hub_b(self) -> AmqpEventHub:
        assert isinstance(self.b.hub, AmqpEventHub)
        return self.b.hub

    def register_on_b(self, address: str) -> ok.MailboxRegistration:
        """Register ``address`` on b and wait until a sees it announced."""
        registration = self.b.hub.register_mailbox(address)
        wait_until(lambda: self.hub_a.where(address) == self.b_id, what=f"a seeing {address} on b")
        return registration

    def stop(self) -> None:
        self.a.stop()
        self.b.stop()


@pytest.fixture
def fleet(vhost: str, tmp_path: Path) -> Iterator[Fleet]:
    pair = Fleet(vhost, tmp_path)
    try:
        yield pair
    finally:
        pair.stop()


def drain_dlq(vhost: str) -> list[str]:
    """The message ids dead-lettered so far (taken off ``fleet.dlq``)."""
    ids: list[str] = []
    with contextlib.closing(pika.BlockingConnection(pika.URLParameters(url(vhost)))) as connection:
        channel = connection.channel()
        while True:
            method, properties, _body = channel.basic_get(DLQ, auto_ack=True)
            if method is None:
                return ids
            ids.append(str(properties.message_id))


def dead_lettered(vhost: str, message_id: str) -> bool:
    seen: list[str] = []

    def arrived() -> bool:
        seen.extend(drain_dlq(vhost))
        return message_id in seen

    wait_until(arrived, what=f"message {message_id} in fleet.dlq")
    return True


def raw_publish(vhost: str, outgoing: Outgoing, routing_key: str | None = None, body: bytes | None = None) -> None:
    """Publish ``outgoing`` as a rogue client would: straight onto ``fleet.msg``."""
    with contextlib.closing(pika.BlockingConnection(pika.URLParameters(url(vhost)))) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.basic_publish(
            outgoing.exchange,
            routing_key or outgoing.routing_key,
            outgoing.body if body is None else body,
            outgoing.properties(),
            mandatory=True,
        )


# -- posts ---------------------------------------------------------------------------------


def test_a_post_from_a_reaches_a_mailbox_on_b_with_its_fields(fleet: Fleet) -> None:
    fleet.register_on_b("agent://billing/scorer")
    sent = fleet.a.hub.bind("c1", "x").post("agent://billing/scorer", {"hello": 1}, metadata={"k": "v"})
    got = fleet.b.hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox("agent://billing/scorer"), 10)
    assert got == sent  # id, source, time, payload, metadata, target: all as stamped on a
    assert (got.source_crew_id, got.source_agent_id, got.target_crew_id) == ("c1", "x", "billing")


def test_pipelined_posts_reach_a_local_and_a_remote_mailbox_in_order(fleet: Fleet) -> None:
    fleet.register_on_b("agent://billing/scorer")
    local = fleet.a.hub.register_mailbox("agent://c1/inbox")
    client = fleet.a.hub.bind("c1", "x")
    remote = [client.post_nowait("agent://billing/scorer", n) for n in range(3)]
    here = [client.post_nowait("agent://c1/inbox", n) for n in range(3)]
    sent = [future.result(10) for future in remote + here]
    reader = fleet.b.hub.bind("billing", "scorer")
    got = [reader.wait_for(ok.WaitOnMailbox("agent://billing/scorer"), 10) for _ in range(3)]
    assert [m.id for m in got] == [m.id for m in sent[:3]]
    assert [m.id for m in fleet.hub_a.kept_messages("agent://c1/inbox")] == [m.id for m in sent[3:]]
    assert local.depth() == 3


def test_posts_across_hosts_keep_fifo(fleet: Fleet) -> None:
    registration = fleet.register_on_b("crew://billing")
    poster = fleet.a.hub.bind("c1", "x")
    for i in range(200):
        poster.post("crew://billing", i)
    with registration.reader() as reader:
        assert [reader.receive().json() for _ in range(200)] == list(range(200))


def test_a_post_is_kept_in_the_recipients_store_before_the_broker_lets_it_go(fleet: Fleet) -> None:
    fleet.register_on_b("agent://billing/scorer")
    sent = fleet.a.hub.bind("c1", "x").post("agent://billing/scorer", "kept")
    wait_until(
        lambda: [m.id for m in fleet.hub_b.kept_messages("agent://billing/scorer")] == [sent.id],
        what="the post in b's store",
    )


def test_posting_to_an_address_no_host_announces_fails_fast(fleet: Fleet) -> None:
    with pytest.raises(MailboxNotFoundError, match="agent://nobody/here"):
        fleet.a.hub.bind("c1", "x").post("agent://nobody/here", 1)


def test_a_closed_remote_mailbox_is_refused_to_its_poster(fleet: Fleet) -> None:
    registration = fleet.register_on_b("agent://billing/scorer")
    registration.close()
    wait_until(lambda: fleet.hub_a.where("agent://billing/scorer") is None, what="a hearing of the close")
    with pytest.raises(MailboxNotFoundError):
        fleet.a.hub.bind("c1", "x").post("agent://billing/scorer", 1)


def test_a_send_to_a_closed_remote_mailbox_fails_with_the_typed_error_not_a_timeout(fleet: Fleet) -> None:
    registration = fleet.register_on_b("agent://billing/scorer")
    registration.close()
    with pytest.raises(MailboxNotFoundError):  # a's roster may still name b: the broker refuses it
        fleet.a.hub.bind("c1", "x").send("agent://billing/scorer", 1, timeout=30)


def test_the_roster_lists_who_is_where(fleet: Fleet) -> None:
    fleet.register_on_b("agent://billing/scorer")
    fleet.a.hub.register_mailbox("crew://front")
    wait_until(lambda: fleet.hub_b.where("crew://front") == fleet.a_id, what="b seeing a's crew")
    where = {(p.entity, p.host) for p in fleet.hub_a.roster()}
    assert {
        ("agent://billing/scorer", fleet.b_id),
        ("crew://front", fleet.a_id),
        (f"_gateway@{fleet.a_id}", fleet.a_id),
        (f"_gateway@{fleet.b_id}", fleet.b_id),
    } <= where


# -- topics ---------------------------------------------------------------------------------


def test_a_publish_on_a_reaches_subscribers_on_b_with_the_same_wildcards(fleet: Fleet) -> None:
    one_word = fleet.b.hub.bind("watch", "w").subscribe("alerts.*")
    any_words = fleet.b.hub.bind("watch", "w2").subscribe("alerts.#")
    publisher = fleet.a.hub.bind("c1", "x")
    first = publisher.publish("alerts.fire", 1)
    second = publisher.publish("alerts.fire.eu", 2)
    assert one_word.receive(10).id == first.id
    assert [any_words.receive(10).id, any_words.receive(10).id] == [first.id, second.id]
    assert one_word.poll() is None  # alerts.fire.eu is two words past alerts


def test_a_scoped_publish_reaches_only_its_crew_on_the_other_host(fleet: Fleet) -> None:
    target = fleet.b.hub.bind("billing", "w").subscribe("jobs.#")
    other = fleet.b.hub.bind("sales", "w").subscribe("jobs.#")
    observer = fleet.b.hub.system.subscribe("jobs.#")
    sent = fleet.a.hub.bind("c1", "x").publish("jobs.new", 1, ok.PublishOptions(target_crew_id="billing"))
    assert target.receive(10).id == sent.id
    assert observer.receive(10).id == sent.id
    unscoped = fleet.a.hub.bind("c1", "x").publish("jobs.other", 2)
    assert other.receive(10).id == unscoped.id  # what came before it (the scoped one) never reached it


def test_wait_for_an_event_published_on_another_host(fleet: Fleet, background: type) -> None:
    waiter = background(lambda: fleet.b.hub.bind("w", "w").wait_for(ok.WaitOnTopic("orders.done"), 10))
    wait_until(lambda: fleet.b.hub.pending_waits().get("on_topic", 0) == 1, what="the wait in place")
    sent = fleet.a.hub.bind("c1", "x").publish("orders.done", {"n": 1})
    assert waiter.get().id == sent.id


def test_a_value_retained_on_a_is_the_last_value_on_b(fleet: Fleet) -> None:
    publisher = fleet.a.hub.bind("c1", "x")
    retained = ok.PublishOptions(retain_as_last_value=True, last_value_key="eur")
    publisher.publish("prices.eur", 1, retained)
    last = publisher.publish("prices.eur", 2, retained)
    reader = fleet.b.hub.bind("r", "r")

    def latest() -> bool:
        value = reader.get_last_value("eur")
        return value is not None and value.id == last.id

    wait_until(latest, what="b holding a's last value")


# -- send / reply ----------------------------------------------------------------------------


def test_send_to_an_agent_on_b_gets_its_reply(fleet: Fleet) -> None:
    fleet.register_on_b("agent://billing/scorer")
    replier = fleet.b.hub.bind("billing", "scorer")

    def serve() -> None:
        request = replier.wait_for(ok.WaitOnMailbox("agent://billing/scorer"), 10)
        assert request.correlation_id is not None and fleet.b.hub.is_active_correlation(request.correlation_id)
        replier.reply(request.correlation_id, {"score": request.json()["n"] * 2})

    server = threading.Thread(target=serve)
    server.start()
    reply = fleet.a.hub.bind("c1", "x").send("agent://billing/scorer", {"n": 21}, timeout=10)
    server.join()
    assert reply.json() == {"score": 42} and (reply.source_crew_id, reply.source_agent_id) == ("billing", "scorer")


def test_the_requesters_timeout_is_authoritative_and_a_late_reply_is_refused(fleet: Fleet) -> None:
    fleet.register_on_b("agent://billing/scorer")
    with pytest.raises(SendTimeoutError):
        fleet.a.hub.bind("c1", "x").send("agent://billing/scorer", 1, timeout=0.5)
    request = fleet.b.hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox("agent://billing/scorer"), 10)
    assert request.correlation_id is not None
    wait_until(lambda: not fleet.b.hub.is_active_correlation(request.correlation_id), what="the deadline on b")
    with pytest.raises(ok.errors.UnknownCorrelationError):
        fleet.b.hub.bind("billing", "scorer").reply(request.correlation_id, "too late")


def test_only_the_recipient_crew_may_reply_across_hosts(fleet: Fleet, background: type) -> None:
    fleet.register_on_b("agent://billing/scorer")
    job = background(lambda: fleet.a.hub.bind("c1", "x").send("agent://billing/scorer", 1, timeout=10))
    request = fleet.b.hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox("agent://billing/scorer"), 10)
    assert request.correlation_id is not None
    with pytest.raises(ok.errors.UnknownCorrelationError):
        fleet.b.hub.bind("intruder", "z").reply(request.correlation_id, "forged")
    fleet.b.hub.bind("billing", "scorer").reply(request.correlation_id, "real")
    assert job.get().json() == "real"


def test_a_reply_that_outruns_its_senders_presence_waits_for_it_without_stalling_the_link(
    fleet: Fleet, background: type
) -> None:
    """Replies are settled as they arrive on the requester's I/O thread; one signed for a
    sender the requester's host has not heard of yet is not refused and does not hold that
    thread while it waits for the presence: the host keeps publishing meanwhile."""
    fleet.register_on_b("agent://billing/scorer")
    job = background(lambda: fleet.a.hub.bind("c1", "x").send("agent://billing/scorer", 1, timeout=30))
    request = fleet.b.hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox("agent://billing/scorer"), 10)
    assert request.correlation_id is not None
    ghost = "agent://billing/ghost"  # may reply (same crew), announced by nobody yet
    hub_b = fleet.hub_b
    reply = hub_b.stamp(
        CallerContext(CrewId("billing"), AgentId("ghost")),
        REPLY_TOPIC,
        "late",
        None,
        CrewId("c1"),
        None,
        request.correlation_id,
    )
    key = answer_key(fleet.a_id)
    headers, body = wire.encode(reply, kind="answer", to=key, sender=ghost, expires_at_ms=now_ms() + 60_000)
    raw_publish(fleet.vhost, Outgoing(MSG_EXCHANGE, key, body, str(reply.id), hub_b.gateway.signer.sign(headers, body)))
    fleet.register_on_b("agent://billing/other")
    fleet.a.hub.bind("c1", "x").post("agent://billing/other", "meanwhile")  # a's link confirms it: not stalled
    assert not job.done
    hub_b.gateway.roster.add([SENDER_PREFIX + ghost])
    hub_b.gateway.roster.heartbeat()
    answered = job.get()
    assert isinstance(answered, Message) and answered.json() == "late" and fleet.hub_a.gateway.rejected == 0


# -- hardening -------------------------------------------------------------------------------


def _signed_post(fleet: Fleet, address: str, payload: object) -> Outgoing:
    """A post as host a's gateway signs it (what a wiretapper could capture)."""
    hub = fleet.hub_a
    to = ok.MailboxAddress.parse(address)
    message = hub.stamp(CallerContext(CrewId("c1"), AgentId("x")), POST_TOPIC, payload, None, to.crew_id, to)
    expires = int(message.published_at.timestamp() * 1000) + 60_000
    return hub.gateway.outgoing(message, kind="post", routing_key=mailbox_key(to), expires_at_ms=expires)


def test_a_forged_signature_is_dead_lettered_and_never_delivered(fleet: Fleet) -> None:
    registration = fleet.register_on_b("agent://billing/scorer")
    outgoing = _signed_post(fleet, "agent://billing/scorer", "genuine")
    forged_body = outgoing.body.replace(b'"genuine"', b'"pay me"')
    raw_publish(fleet.vhost, outgoing, body=forged_body)
    assert dead_lettered(fleet.vhost, outgoing.message_id)
    assert registration.depth() == 0 and fleet.hub_b.gateway.rejected == 1


def test_a_message_replayed_into_another_inbox_is_dead_lettered(fleet: Fleet) -> None:
    fleet.register_on_b("agent://billing/scorer")
    other = fleet.register_on_b("agent://billing/auditor")
    outgoing = _signed_post(fleet, "agent://billing/scorer", "for the scorer")
    raw_publish(fleet.vhost, outgoing, routing_key=mailbox_key(ok.MailboxAddress.parse("agent://billing/auditor")))
    assert dead_lettered(fleet.vhost, outgoing.message_id)
    assert other.depth() == 0


def test_an_exact_replay_is_dropped_as_a_duplicate_and_delivered_once(fleet: Fleet) -> None:
    registration = fleet.register_on_b("agent://billing/scorer")
    outgoing = _signed_post(fleet, "agent://billing/scorer", "once")
    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(str(m)), level="WARNING")
    try:
        raw_publish(fleet.vhost, outgoing)
        raw_publish(fleet.vhost, outgoing)
        wait_until(lambda: fleet.hub_b.gateway.duplicates == 1, what="b dropping the second copy")
    finally:
        logger.remove(sink)
    assert any(outgoing.message_id in line and "received already" in line for line in warnings), warnings
    with registration.reader() as reader:
        assert reader.receive().id == outgoing.message_id
    assert registration.depth() == 0 and fleet.hub_b.gateway.rejected == 0


def test_other_content_under_a_seen_id_is_dead_lettered_as_a_replay(fleet: Fleet) -> None:
    registration = fleet.register_on_b("agent://billing/scorer")
    outgoing = _signed_post(fleet, "agent://billing/scorer", "once")
    raw_publish(fleet.vhost, outgoing)
    twice = outgoing.body.replace(b'"once"', b'"twice"')  # signed by a too: only its content differs
    unsigned = {name: value for name, value in outgoing.headers.items() if name != SIGNATURE_HEADER}
    raw_publish(
        fleet.vhost, attrs.evolve(outgoing, body=twice, headers=fleet.hub_a.gateway.signer.sign(unsigned, twice))
    )
    assert dead_lettered(fleet.vhost, outgoing.message_id)
    with registration.reader() as reader:
        assert reader.receive().payload == b'"once"'
    assert registration.depth() == 0


def test_the_receiving_host_rechecks_the_acl_against_the_verified_sender(vhost: str, tmp_path: Path) -> None:
    registry = AclRegistry()
    registry.register_crew("billing", "billing", links=[CrewLink("partner", "inbound")])
    registry.register_crew("partner", "partner")
    # Host a runs no ACL at all (misconfigured or compromised); host b's links decide.
    pair = Fleet(vhost, tmp_path, middleware=[AclMiddleware(RestrictiveCrewLinkPolicy(registry))])
    try:
        registration = pair.register_on_b("agent://billing/scorer")
        allowed = pair.a.hub.bind("partner", "p").post("agent://billing/scorer", "granted")
        refused = pair.a.hub.bind("intruder", "i").post("agent://billing/scorer", "let me in")
        assert dead_lettered(vhost, refused.id)
        with registration.reader() as reader:
            assert reader.receive().id == allowed.id
        assert registration.depth() == 0
    finally:
        pair.stop()


def test_a_second_gateway_for_the_same_host_fails_loudly(fleet: Fleet, tmp_path: Path) -> None:
    fleet.register_on_b("agent://billing/scorer")
    with pytest.raises(ok.errors.ExclusiveConsumerError, match=r"(?i)another gateway"):
        start_host(fleet.vhost, fleet.b_id, tmp_path / "b-again.db", fleet.keys)


# -- crews ----------------------------------------------------------------------------------


def test_a_sleeping_crew_on_b_is_woken_by_a_post_from_a(fleet: Fleet) -> None:
    agent = Agent("a", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("done")]))  # type: ignore[list-item]
    blueprint = CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))
    supervisor = CrewSupervisor(fleet.b, factories={"c": lambda _: blueprint})
    try:
        supervisor.spawn("c", "c1")
        wait_until(lambda: supervisor.status("c1") is CrewStatus.WAITING, what="the crew waiting for mail")
        assert supervisor.sleep("c1") is True
        assert supervisor.state("c1") is LifecycleState.ASLEEP
        wait_until(lambda: fleet.hub_a.where("agent://c1/a") == fleet.b_id, what="a seeing the sleeper's mailbox")
        fleet.a.hub.bind("other", "x").post("agent://c1/a", {"hello": 1})
        wait_until(lambda: supervisor.status("c1") is CrewStatus.COMPLETED, what="the crew woken and done")
        assert supervisor.stats.wakes == 1
    finally:
        supervisor.stop()


def test_a_message_already_expired_at_delivery_is_dead_lettered(fleet: Fleet) -> None:
    registration = fleet.register_on_b("agent://billing/scorer")
    hub = fleet.hub_a
    to = ok.MailboxAddress.parse("agent://billing/scorer")
    message = hub.stamp(CallerContext(CrewId("c1"), AgentId("x")), POST_TOPIC, "stale", None, to.crew_id, to)
    expired = int(message.published_at.timestamp() * 1000) - 1
    outgoing = hub.gateway.outgoing(message, kind="post", routing_key=mailbox_key(to), expires_at_ms=expired)
    raw_publish(fleet.vhost, outgoing)
    assert dead_lettered(fleet.vhost, outgoing.message_id)
    assert registration.depth() == 0


def test_a_unit_of_work_posts_to_a_mailbox_on_another_host_through_the_outbox(fleet: Fleet) -> None:
    registration = fleet.register_on_b("agent://audit/log")
    totals = fleet.b.hub.bind("audit", "w").subscribe("totals.*")
    with fleet.hub_a.unit_of_work("billing", "scorer") as uow:
        sent = uow.post("agent://audit/log", {"total": 3})
        published = uow.publish("totals.updated", {"total": 3})
    with registration.reader() as reader:
        assert reader.receive().id == sent.id
    assert totals.receive(10).id == published.id
    wait_until(
        lambda: (
            [(r.message.id, r.state.value) for r in fleet.hub_a.outbox_records() if r.message.id == sent.id]
            == [(sent.id, "Dispatched")]
        ),
        what="the outbox row dispatched",
    )


def test_a_host_that_lost_the_broker_redeclares_its_slice_and_loses_nothing(vhost: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    a_id, b_id = f"a-{suffix}", f"b-{suffix}"
    keys = fleet_keys([a_id, b_id])
    proxy = TcpProxy(BROKER)
    a = start_host(vhost, a_id, tmp_path / "a.db", keys)
    fleet = FleetConfig(proxy.url(vhost), b_id, keys, presence_interval=0.2, presence_ttl=3.0)
    b = ok.Runtime.start(store=str(tmp_path / "b.db"), fleet=fleet)
    try:
        assert isinstance(a.hub, AmqpEventHub) and isinstance(b.hub, AmqpEventHub)
        hub_a, hub_b = a.hub, b.hub
        registration = b.hub.register_mailbox("agent://billing/scorer")
        wait_until(lambda: hub_a.where("agent://billing/scorer") == b_id, what="a seeing b's mailbox")
        proxy.cut()
        wait_until(lambda: not hub_b.gateway.link.connected, what="b losing the broker")
        during = a.hub.bind("c1", "x").post("agent://billing/scorer", "during")  # kept by b's durable inbox
        late = b.hub.register_mailbox("crew://late")  # registered while cut off: opened with the reconnect
        proxy.restore()
        wait_until(lambda: hub_b.gateway.link.connected, timeout=30, what="b reconnecting")
        wait_until(lambda: hub_a.where("crew://late") == b_id, what="a seeing the mailbox b opened offline")
        to_late = a.hub.bind("c1", "x").post("crew://late", "hello")
        with late.reader() as reader:
            assert reader.receive().id == to_late.id
        after = a.hub.bind("c1", "x").post("agent://billing/scorer", "after")
        with registration.reader() as reader:
            assert [reader.receive().id, reader.receive().id] == [during.id, after.id]
        events = b.hub.bind("w", "w").subscribe("news.*")  # the topic fan-in is back too
        published = a.hub.bind("c1", "x").publish("news.flash", 1)
        assert events.receive(10).id == published.id
    finally:
        a.stop()
        b.stop()
        proxy.close()


def test_a_post_to_a_host_that_is_down_waits_in_its_inbox_for_the_restart(fleet: Fleet, tmp_path: Path) -> None:
    fleet.register_on_b("agent://billing/scorer")
    fleet.b.stop()  # the mailbox stays durably registered in b's store; b's roster entry lives on for its ttl
    sent = fleet.a.hub.bind("c1", "x").post("agent://billing/scorer", "while you were out")
    fleet.b = start_host(fleet.vhost, fleet.b_id, tmp_path / "b.db", fleet.keys)
    registration = fleet.b.hub.register_mailbox("agent://billing/scorer")
    with registration.reader() as reader:
        assert reader.receive().id == sent.id


def test_an_address_too_long_for_amqp_is_refused_before_it_is_registered(fleet: Fleet) -> None:
    address = f"agent://{'c' * 128}/{'a' * 128}"
    with pytest.raises(ok.errors.InvalidArgumentError, match="too long to cross hosts"):
        fleet.b.hub.register_mailbox(address)
    assert not fleet.hub_b.is_registered(address)


def test_a_mailbox_no_host_announces_is_not_found_naming_the_hosts_asked(fleet: Fleet) -> None:
    with pytest.raises(
        MailboxNotFoundError, match=rf"hosts on this host's roster: .*{fleet.b_id} \(heard \d+\.\d s ago\)"
    ):
        fleet.a.hub.bind("c1", "x").post("agent://nobody/here", 1)
