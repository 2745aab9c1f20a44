"""Dead letters never vanish: an inbox overflow, an expiry and a gateway's rejection each
reach the reporter with their reason and are reported to the signed sender; a forgery is
counted but not reported; fleet.dlq keeps the operators' copy."""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from orkeon_actors.errors import BrokerNackError, MailboxNotFoundError
from orkeon_actors.fleet.broker_admin import apply_policies
from orkeon_actors.fleet.dead_letters import DeadLetter, DeadLetterReporter
from orkeon_actors.fleet.signing import HostKeys, Signer, Verifier
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import DLQ, MSG_EXCHANGE, Declarer, InboxCaps, inbox_queue, mailbox_key
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.testing import wait_until

from .conftest import ready_count, url

pytestmark = pytest.mark.rabbitmq

KEYS = HostKeys({"host-a": secrets.token_bytes(32), "host-b": secrets.token_bytes(32)})
SENDER = "agent://billing/scorer"


def _now_ms() -> int:
    return int(time.time() * 1000)


class Reports:
    def __init__(self) -> None:
        self.items: list[DeadLetter] = []
        self.lock = threading.Lock()
        self.refuse: type[Exception] | None = None

    def __call__(self, dead: DeadLetter) -> None:
        if self.refuse is not None:
            raise self.refuse("the sender's mailbox is gone")
        with self.lock:
            self.items.append(dead)

    def ids(self) -> list[str]:
        with self.lock:
            return [d.message_id for d in self.items]


Fleet = tuple[BrokerLink, MailboxAddress, Reports, DeadLetterReporter, InMemoryMetricReader]


def _declare_inbox(link: BrokerLink, box: MailboxAddress) -> None:
    done = threading.Event()

    def declare() -> None:
        assert link.channel is not None
        Declarer().inbox(box).run(link.channel, done.set)

    link.run_on_io_thread(declare)
    assert done.wait(10)


@pytest.fixture
def fleet(vhost: str) -> Iterator[Fleet]:
    apply_policies(vhost, InboxCaps(max_length=1))
    box = MailboxAddress.parse(f"agent://crew-{uuid.uuid4().hex[:6]}/a")
    link = BrokerLink(url(vhost), name="dlq-test", on_connected=Declarer().shared().inbox(box).run).start()
    reports = Reports()
    reader = InMemoryMetricReader()
    reporter = DeadLetterReporter(
        link, Verifier(KEYS, lambda _s: "host-a", _now_ms), reports, meter_provider=MeterProvider([reader])
    ).start()
    yield link, box, reports, reporter, reader
    reporter.stop()
    link.stop()


def _signed(box: MailboxAddress, *, key_host: str = "host-a", expiration_ms: int | None = None) -> Outgoing:
    message_id = uuid.uuid4().hex
    headers = Signer(key_host, KEYS).sign(
        {"message_id": message_id, "from": SENDER, "to": str(box), "expires_at": _now_ms() + 60_000}, b"{}"
    )
    return Outgoing(MSG_EXCHANGE, mailbox_key(box), b"{}", message_id, headers, expiration_ms=expiration_ms)


def _counted(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    data = reader.get_metrics_data()
    counts: dict[tuple[str, str], int] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "orkeon_fleet_dead_letters_total":
                    for point in metric.data.data_points:
                        attributes = dict(point.attributes or {})
                        counts[(str(attributes["reason"]), str(attributes["reported"]))] = int(point.value)
    return counts


def test_an_overflow_is_reported_to_its_sender_and_counted(vhost: str, fleet: Fleet) -> None:
    link, box, reports, reporter, reader = fleet
    dlq_before = ready_count(vhost, DLQ)
    link.publish(_signed(box)).result(10)
    overflow = _signed(box)
    with pytest.raises(BrokerNackError):
        link.publish(overflow).result(10)
    wait_until(lambda: overflow.message_id in reports.ids(), what="the overflow report")
    dead = reports.items[-1]
    assert (dead.reason, dead.queue, dead.sender, dead.recipient) == ("maxlen", inbox_queue(box), SENDER, str(box))
    wait_until(lambda: reporter.stats.reported >= 1, what="the report counted")
    assert reporter.stats.by_reason["maxlen"] >= 1
    assert _counted(reader)[("maxlen", "true")] >= 1
    wait_until(lambda: ready_count(vhost, DLQ) == dlq_before + 1, what="the operators' copy in fleet.dlq")


def test_an_expired_message_is_reported_as_expired(fleet: Fleet) -> None:
    link, _, reports, _, _ = fleet
    box = MailboxAddress.parse(f"agent://crew-{uuid.uuid4().hex[:6]}/b")
    _declare_inbox(link, box)
    message = _signed(box, expiration_ms=50)
    link.publish(message).result(10)
    wait_until(lambda: message.message_id in reports.ids(), what="the expiry report")
    assert [d.reason for d in reports.items if d.message_id == message.message_id] == ["expired"]


def test_a_rejected_delivery_is_reported_as_rejected(fleet: Fleet) -> None:
    link, _, reports, _, _ = fleet
    box = MailboxAddress.parse(f"agent://crew-{uuid.uuid4().hex[:6]}/c")
    _declare_inbox(link, box)
    received: list[Delivery] = []
    link.consume(inbox_queue(box), received.append, prefetch=1)
    message = _signed(box)
    link.publish(message).result(10)
    wait_until(lambda: len(received) == 1, what="the delivery")
    link.reject(received[0])
    wait_until(lambda: message.message_id in reports.ids(), what="the rejection report")
    assert [d.reason for d in reports.items if d.message_id == message.message_id] == ["rejected"]


def test_a_forgery_is_counted_but_never_reported(fleet: Fleet) -> None:
    link, box, reports, reporter, reader = fleet
    forged_keys = HostKeys({"host-a": secrets.token_bytes(32)})
    message_id = uuid.uuid4().hex
    headers = Signer("host-a", forged_keys).sign(
        {"message_id": message_id, "from": SENDER, "to": str(box), "expires_at": _now_ms() + 60_000}, b"{}"
    )
    before = reporter.stats.unreported
    # the inbox is full (cap 1, from the overflow test or this fill): the forgery overflows
    link.publish(_signed(box)).exception(10)
    link.publish(Outgoing(MSG_EXCHANGE, mailbox_key(box), b"{}", message_id, headers)).exception(10)
    wait_until(lambda: reporter.stats.unreported > before, what="the forgery counted")
    assert message_id not in reports.ids()
    assert _counted(reader)[("maxlen", "false")] >= 1


def test_a_report_the_sender_cannot_take_is_counted_and_acked(vhost: str, fleet: Fleet) -> None:
    link, box, reports, reporter, _ = fleet
    reports.refuse = MailboxNotFoundError
    before = reporter.stats.unreported
    link.publish(_signed(box)).exception(10)
    link.publish(_signed(box)).exception(10)
    wait_until(lambda: reporter.stats.unreported > before, what="the refused report counted")
    wait_until(lambda: ready_count(vhost, "fleet.dlq.reports") == 0, what="the reports queue drained (acked)")
