"""rt.fleet on two hosts of one process, on the real broker: spawn on another host returns
a crew that is running there and routable from here; refusals are fast and typed; stop
ends the crew where it lives and takes it off the rosters; a report of a dead letter
reaches its sender."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from loguru import logger

import orkeon_actors as ok
from orkeon_actors.bench.lifecycle import FACTORIES, FOREVER_NAME
from orkeon_actors.crew import CrewStatus
from orkeon_actors.errors import FleetControlError, MailboxNotFoundError
from orkeon_actors.fleet.dead_letters import DeliveryFailed
from orkeon_actors.fleet.gateway import now_ms
from orkeon_actors.fleet.hub import AmqpEventHub
from orkeon_actors.fleet.operations import STOPPED, Fleet
from orkeon_actors.hub.amqp.topology import mailbox_key
from orkeon_actors.hub.port import POST_TOPIC, CallerContext, MailboxRegistration
from orkeon_actors.lifecycle import CrewSupervisor, LifecycleState
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CrewId
from orkeon_actors.testing import wait_until

from .fleet import fleet_keys, start_host

pytestmark = pytest.mark.rabbitmq


class Hosts:
    def __init__(self, vhost: str, tmp: Path) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.a_id, self.b_id = f"a-{suffix}", f"b-{suffix}"
        keys = fleet_keys([self.a_id, self.b_id])
        self.a = start_host(vhost, self.a_id, tmp / "a.db", keys)
        self.b = start_host(vhost, self.b_id, tmp / "b.db", keys, kinds=(FOREVER_NAME,))
        self.supervisor_b = CrewSupervisor(self.b, factories=FACTORIES)
        self.fleet_b.serve(self.supervisor_b)
        wait_until(lambda: self.b_id in {p.host for p in self.hub(self.a).roster()}, what="b on a's roster")
        wait_until(lambda: self.a_id in {p.host for p in self.hub(self.b).roster()}, what="a on b's roster")

    @staticmethod
    def hub(runtime: ok.Runtime) -> AmqpEventHub:
        assert isinstance(runtime.hub, AmqpEventHub)
        return runtime.hub

    @property
    def fleet_a(self) -> Fleet:
        assert self.a.fleet is not None
        return self.a.fleet

    @property
    def fleet_b(self) -> Fleet:
        assert self.b.fleet is not None
        return self.b.fleet

    def stop(self) -> None:
        self.supervisor_b.stop()
        self.a.stop()
        self.b.stop()


@pytest.fixture
def hosts(vhost: str, tmp_path: Path) -> Iterator[Hosts]:
    made = Hosts(vhost, tmp_path)
    yield made
    made.stop()


def test_spawn_on_another_host_returns_a_running_routable_crew(hosts: Hosts) -> None:
    crew = hosts.fleet_a.spawn(FOREVER_NAME, host=hosts.b_id, crew_id="billing-1", timeout=20)
    assert crew == "billing-1"
    assert hosts.supervisor_b.state(crew) is LifecycleState.ACTIVE
    assert hosts.hub(hosts.a).where("agent://billing-1/a") == hosts.b_id
    hosts.a.hub.bind("caller").post("agent://billing-1/a", b'{"go": true}')  # routable at once
    wait_until(lambda: hosts.supervisor_b.outcome(crew) is not None, timeout=20, what="the crew completing")


def test_an_unknown_host_is_refused_before_anything_is_sent(hosts: Hosts) -> None:
    with pytest.raises(FleetControlError, match="host 'nowhere' is not on the roster"):
        hosts.fleet_a.spawn(FOREVER_NAME, host="nowhere", timeout=5)


def test_a_kind_the_host_does_not_announce_is_refused(hosts: Hosts) -> None:
    with pytest.raises(FleetControlError, match="cannot spawn 'payroll': it announces the kinds forever"):
        hosts.fleet_a.spawn("payroll", host=hosts.b_id, timeout=5)


def test_a_host_serving_no_supervisor_refuses_with_the_reason(hosts: Hosts) -> None:
    with pytest.raises(FleetControlError, match=r"refused spawn: InvalidArgumentError: host '.*' serves no supervisor"):
        hosts.fleet_b.spawn(FOREVER_NAME, host=hosts.a_id, timeout=10)


def _assert_ended(hosts: Hosts, crew: str) -> None:
    """``crew`` ended on b by a's stop: failed as stopped, gone from both rosters, its
    mailbox closed to posts."""
    outcome = hosts.supervisor_b.outcome(crew)
    assert outcome is not None and outcome.status is CrewStatus.FAILED
    assert outcome.failure is not None and outcome.failure.error_type == STOPPED
    assert f"from host {hosts.a_id!r}" in outcome.failure.message
    address = f"agent://{crew}/a"
    assert hosts.hub(hosts.a).where(address) is None  # at once on the caller's roster
    assert hosts.hub(hosts.b).where(address) is None
    with pytest.raises(MailboxNotFoundError):
        hosts.a.hub.bind("caller").post(address, b"{}")


def test_stop_ends_a_live_crew_on_its_host_and_takes_it_off_the_roster(hosts: Hosts) -> None:
    crew = hosts.fleet_a.spawn(FOREVER_NAME, host=hosts.b_id, timeout=20)
    wait_until(lambda: hosts.supervisor_b.status(crew) is CrewStatus.WAITING, timeout=20, what="crew waiting")
    assert hosts.fleet_a.stop(crew, timeout=20) == crew
    _assert_ended(hosts, crew)
    assert hosts.supervisor_b.state(crew) is LifecycleState.FAILED


def test_stop_ends_a_sleeping_crew_too(hosts: Hosts) -> None:
    crew = hosts.fleet_a.spawn(FOREVER_NAME, host=hosts.b_id, timeout=20)
    wait_until(lambda: hosts.supervisor_b.status(crew) is CrewStatus.WAITING, timeout=20, what="crew waiting")
    assert hosts.supervisor_b.sleep(crew)
    assert hosts.fleet_a.stop(crew, timeout=20) == crew
    _assert_ended(hosts, crew)


def test_stop_ends_a_crew_caught_falling_asleep_with_its_actor_stopping(
    hosts: Hosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop reaches b while the crew's sleep snapshot committed and its actor is
    stopping (its mailboxes being parked, held here): it is not lost. b ends the crew
    once its sleep is over (woken and told End), and the stop returns within its bound.
    Without the supervisor-side ``end`` the End went to a stopping actor: refused as
    "kept going to sleep", or dropped with the actor's inbox and timed out after 30 s."""
    crew = hosts.fleet_a.spawn(FOREVER_NAME, host=hosts.b_id, timeout=20)
    wait_until(lambda: hosts.supervisor_b.status(crew) is CrewStatus.WAITING, timeout=20, what="crew waiting")
    parking, release = threading.Event(), threading.Event()
    park = hosts.b.hub.park_mailboxes

    def held_park(registrations: Sequence[MailboxRegistration]) -> None:
        if not parking.is_set():  # the first park: the sleep's (not the one after the wake)
            parking.set()
            release.wait(30)
        park(registrations)

    monkeypatch.setattr(hosts.b.hub, "park_mailboxes", held_park)
    ends: list[str] = []
    sink = logger.add(
        lambda m: ends.append(m.record["extra"]["crew_id"]), filter=lambda r: r["extra"].get("event") == "end"
    )
    try:
        slept: list[bool] = []
        sleeper = threading.Thread(target=lambda: slept.append(hosts.supervisor_b.sleep(crew)))
        sleeper.start()
        wait_until(parking.is_set, timeout=20, what="the crew's actor parking its mailboxes for the sleep")
        stopped: list[object] = []

        def stop() -> None:
            try:
                stopped.append(hosts.fleet_a.stop(crew, timeout=20))
            except Exception as exc:  # the assertion below names it
                stopped.append(exc)

        stopper = threading.Thread(target=stop)
        stopper.start()
        wait_until(lambda: stopped or crew in ends, timeout=20, what="b's supervisor taking the stop")
        release.set()
        stopper.join(30)
        sleeper.join(30)
    finally:
        release.set()
        logger.remove(sink)
    assert stopped == [crew]
    assert slept == [True]  # it did fall asleep, then was woken and ended
    _assert_ended(hosts, crew)
    assert hosts.supervisor_b.state(crew) is LifecycleState.FAILED


def test_stop_of_a_crew_its_host_does_not_know_is_refused_with_the_reason(hosts: Hosts) -> None:
    hosts.b.hub.register_mailbox("agent://stray/a")  # announced by b, but no crew of its supervisor
    wait_until(lambda: hosts.hub(hosts.a).where("agent://stray/a") == hosts.b_id, what="b's mailbox on a")
    with pytest.raises(FleetControlError, match=r"refused stop: FleetControlError: crew 'stray' is not running"):
        hosts.fleet_a.stop("stray", timeout=10)


def test_stop_of_a_crew_no_host_announces_is_refused(hosts: Hosts) -> None:
    with pytest.raises(FleetControlError, match="cannot stop crew 'ghost': no host announces it"):
        hosts.fleet_a.stop("ghost", timeout=5)


def test_a_dead_letter_report_reaches_the_senders_mailbox_on_its_host(hosts: Hosts) -> None:
    sender = hosts.a.hub.register_mailbox("agent://billing/scorer")
    target = hosts.b.hub.register_mailbox("agent://ledger/book")
    wait_until(lambda: hosts.hub(hosts.a).where("agent://ledger/book") == hosts.b_id, what="b's mailbox on a")
    posted = hosts.a.hub.bind("billing", "scorer").post("agent://ledger/book", b"{}")
    with target.reader() as reader:
        assert reader.receive().id == posted.id
    # a post of the scorer's that expired before b ever saw it: b refuses it, the
    # reporter tells its sender (a replay of a seen message would not be reported)
    hub_a = hosts.hub(hosts.a)
    book = MailboxAddress.parse("agent://ledger/book")
    late = hub_a.stamp(
        CallerContext(CrewId("billing"), AgentId("scorer")), POST_TOPIC, "late", None, book.crew_id, book
    )
    expired = hub_a.gateway.outgoing(late, kind="post", routing_key=mailbox_key(book), expires_at_ms=now_ms() - 1)
    hub_a.gateway.link.publish(expired).result(10)
    with sender.reader() as reader:
        report = reader.receive()
    failure = DeliveryFailed.of_message(report)
    assert failure == DeliveryFailed(str(late.id), "agent://ledger/book", "rejected", "inbox.agent://ledger/book")
    assert report.source_crew_id.is_system


def test_a_sender_without_a_mailbox_can_read_why_its_post_was_dead_lettered(hosts: Hosts) -> None:
    target = hosts.b.hub.register_mailbox("agent://ledger/book")
    wait_until(lambda: hosts.hub(hosts.a).where("agent://ledger/book") == hosts.b_id, what="b's mailbox on a")
    told: list[DeliveryFailed] = []
    hosts.fleet_a.on_delivery_failed.append(told.append)
    hub_a = hosts.hub(hosts.a)
    book = MailboxAddress.parse("agent://ledger/book")
    # front/x posts without a mailbox of its own; its post expires before b sees it
    late = hub_a.stamp(CallerContext(CrewId("front"), AgentId("x")), POST_TOPIC, "late", None, book.crew_id, book)
    expired = hub_a.gateway.outgoing(late, kind="post", routing_key=mailbox_key(book), expires_at_ms=now_ms() - 1)
    hub_a.gateway.link.publish(expired).result(10)
    expected = DeliveryFailed(str(late.id), "agent://ledger/book", "rejected", "inbox.agent://ledger/book")
    wait_until(lambda: hosts.fleet_a.delivery_failed(str(late.id)) == expected, what="the failure on a, by id")
    assert told == [expected] and target.depth() == 0
