"""Dead letters never vanish: each one is counted and reported back to its sender
(cross-host messaging design, §10.1).

Every inbox dead-letters to the fanout exchange ``fleet.dlx``. Two queues are bound to it:

* ``fleet.dlq``: the copy operators inspect (capped by policy, oldest dropped first);
* ``fleet.dlq.reports`` (:data:`REPORTS_QUEUE`): the copy :class:`DeadLetterReporter`
  consumes. Every host runs one reporter on it (not exclusive: the broker hands each
  dead letter to one of them), so reporting goes on while any host is up.

For each dead letter the reporter reads RabbitMQ's ``x-death`` header (why: ``maxlen``
for an inbox over its cap, ``expired`` for a message past its TTL, ``rejected`` for one a
gateway refused; and from which queue), counts it on
``orkeon_fleet_dead_letters_total{reason}`` and in :class:`DeadLetterStats`, then:

* if the message carries a valid signature (any fleet host's key, expired or not), it
  calls ``report(dead_letter)``, which delivers a typed ``DeliveryFailed`` system message
  to the sender's mailbox (the distributed hub's ``report_failure``);
* unless a gateway refused it for a security reason: its signed refusal
  (:mod:`~orkeon_actors.fleet.refusals`) says not to report it (a replay into another
  inbox, a forgery with a valid key, an impersonation: the sender's own copy was
  delivered, or it never sent one); a refusal no fleet host signed is not reported
  either;
* if not (forged, unsigned, or a foreign host's), it is **not** reported: reporting a
  forgery to the mailbox it names would let anyone with broker access write into any
  mailbox. It is logged at WARNING and counted with ``reported=false``.

The reporter acks a dead letter once handled. A report that fails with
``BrokerUnavailableError`` (the broker went away meanwhile) is not acked: the broker redelivers it after the
reconnect (at-least-once: a sender may be told twice about one message, never zero
times); one that fails otherwise (the sender's mailbox is gone: ``MailboxNotFoundError``)
is logged, counted ``reported=false`` and acked. Callbacks run on a worker thread, never on the broker's I/O thread.
"""

from __future__ import annotations

import json
import queue as queue_module
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Final

import attrs
import pika.channel
from loguru import logger
from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider

from orkeon_actors.errors import (
    BrokerError,
    BrokerUnavailableError,
    EventHubError,
    InvalidArgumentError,
    SignatureError,
)
from orkeon_actors.fleet.refusals import REFUSAL, REFUSED_BY, REFUSED_ON, refusal_of
from orkeon_actors.fleet.signing import Verifier
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery
from orkeon_actors.hub.amqp.topology import DLX
from orkeon_actors.hub.port import EventHub
from orkeon_actors.model.message import Message

__all__ = [
    "DELIVERY_FAILED",
    "METER_NAME",
    "REPORTS_QUEUE",
    "DeadLetter",
    "DeadLetterReporter",
    "DeadLetterStats",
    "DeliveryFailed",
    "mailbox_reporter",
]

REPORTS_QUEUE: Final = "fleet.dlq.reports"
DELIVERY_FAILED: Final = "delivery_failed"
"""The ``type`` of a :class:`DeliveryFailed` payload (and its ``orkeon.type`` metadata)."""
METER_NAME: Final = "orkeon_actors.fleet"
_log = logger.bind(component="orkeon_actors.fleet")


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@attrs.frozen
class DeadLetter:
    """One dead-lettered message: ``reason`` (``maxlen``, ``expired``, ``rejected``, or
    RabbitMQ's other reasons) and ``queue`` from its latest ``x-death`` entry; ``sender``,
    ``recipient`` and ``message_id`` from its signed headers (empty when absent)."""

    reason: str
    queue: str
    message_id: str
    sender: str
    recipient: str
    headers: Mapping[str, Any]
    body: bytes
    detail: str = ""
    """Why a gateway refused it (``x-orkeon-refusal``: the error's type and message);
    empty for one the broker dead-lettered itself."""

    @classmethod
    def of(cls, delivery: Delivery) -> DeadLetter:
        headers = delivery.headers
        deaths = headers.get("x-death")
        latest: Mapping[str, Any] = deaths[0] if isinstance(deaths, list) and deaths else {}
        reason = _text(latest.get("reason", headers.get("x-first-death-reason", "unknown")))
        queue = _text(latest.get("queue", headers.get("x-first-death-queue", "")))
        if REFUSED_BY in headers:  # copied to fleet.dlx by the refusing gateway
            reason, queue = "rejected", _text(headers.get(REFUSED_ON, ""))
        return cls(
            reason,
            queue,
            _text(headers.get("message_id", delivery.message_id or "")),
            _text(headers.get("from", "")),
            _text(headers.get("to", "")),
            headers,
            delivery.body,
            _text(headers.get(REFUSAL, "")),
        )


@attrs.frozen
class DeliveryFailed:
    """What a sender's mailbox receives when one of its messages was dead-lettered: a
    system message whose JSON payload is ``{"type": "delivery_failed", "message_id",
    "to", "reason", "queue"}`` and whose metadata has ``orkeon.type = delivery_failed``.
    Read one with :meth:`of_message`."""

    message_id: str
    to: str
    reason: str
    queue: str

    def payload(self) -> bytes:
        body = {"type": DELIVERY_FAILED, **attrs.asdict(self)}
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def of_message(cls, message: Message) -> DeliveryFailed | None:
        """The failure ``message`` reports, or ``None`` if it is not such a report."""
        if message.metadata.get("orkeon.type") != DELIVERY_FAILED:
            return None
        body = json.loads(message.payload)
        return cls(str(body["message_id"]), str(body["to"]), str(body["reason"]), str(body["queue"]))


def mailbox_reporter(hub: EventHub) -> Callable[[DeadLetter], None]:
    """``report`` for :class:`DeadLetterReporter`: post a :class:`DeliveryFailed` to the
    sender's mailbox through ``hub`` as the system (local or on its host: the hub routes
    it). A sender that is not a mailbox (a gateway's own traffic) raises
    ``InvalidArgumentError``; one without a mailbox ``MailboxNotFoundError``."""
    client = hub.system

    def report(dead: DeadLetter) -> None:
        if not dead.sender.startswith(("agent://", "crew://", "client://")):
            raise InvalidArgumentError(f"the sender {dead.sender!r} of {dead.message_id} has no mailbox to report to")
        failure = DeliveryFailed(dead.message_id, dead.recipient.removeprefix("mbox."), dead.reason, dead.queue)
        client.post(dead.sender, failure.payload(), {"orkeon.type": DELIVERY_FAILED})

    return report


class DeadLetterStats:
    """Plain counters (thread-safe): dead letters seen by reason, and how many were
    reported to their sender or not."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_reason: Counter[str] = Counter()
        self.reported = 0
        self.unreported = 0

    def count(self, reason: str, reported: bool) -> None:
        with self._lock:
            self.by_reason[reason] += 1
            if reported:
                self.reported += 1
            else:
                self.unreported += 1


class DeadLetterReporter:
    """Consumes :data:`REPORTS_QUEUE` on ``link`` and reports (see the module docstring).

    ``report(dead_letter)`` delivers the failure to the sender; ``verifier`` checks the
    signature; ``meter_provider`` (``None``: the global one) receives the counter.
    """

    def __init__(
        self,
        link: BrokerLink,
        verifier: Verifier,
        report: Callable[[DeadLetter], None],
        *,
        prefetch: int = 32,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self._link = link
        self._verifier = verifier
        self._report = report
        self._prefetch = prefetch
        self.stats = DeadLetterStats()
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(METER_NAME)
        self._counter = meter.create_counter(
            "orkeon_fleet_dead_letters_total", unit="{message}", description="dead-lettered messages, by reason"
        )
        self._work: queue_module.Queue[Delivery | None] = queue_module.Queue()
        self._worker = threading.Thread(target=self._run, name="fleet-dead-letters", daemon=True)

    def start(self, timeout: float = 10.0) -> DeadLetterReporter:
        """Declare the reports queue (durable, bound to ``fleet.dlx``) and consume it."""
        declared: Future[None] = Future()

        def declare() -> None:
            channel: pika.channel.Channel | None = self._link.channel
            if channel is None:
                declared.set_exception(BrokerError("the broker link has no channel yet: start it first"))
                return
            channel.queue_declare(
                REPORTS_QUEUE,
                durable=True,
                arguments={"x-queue-type": "classic"},
                callback=lambda _f: channel.queue_bind(
                    REPORTS_QUEUE, DLX, "", callback=lambda _f: declared.set_result(None)
                ),
            )

        self._link.run_on_io_thread(declare)
        declared.result(timeout)
        self._worker.start()
        self._link.consume(REPORTS_QUEUE, self._work.put, prefetch=self._prefetch, exclusive=False, timeout=timeout)
        return self

    def stop(self) -> None:
        """End the worker (the link's owner stops the link)."""
        if self._worker.is_alive():
            self._work.put(None)
            self._worker.join(10)

    def _run(self) -> None:
        while True:
            delivery = self._work.get()
            if delivery is None:
                return
            self._handle(delivery)

    def _handle(self, delivery: Delivery) -> None:
        dead = DeadLetter.of(delivery)
        try:
            refusal = refusal_of(dead.headers, dead.body, self._verifier)
            host = self._verifier.signer_of(dead.headers, dead.body)
        except SignatureError as exc:
            _log.warning(
                "dead letter {} from queue {} ({}) not reported to {!r}: {}",
                dead.message_id,
                dead.queue,
                dead.reason,
                dead.sender,
                exc,
            )
            self._count(dead.reason, reported=False)
            self._link.ack(delivery)
            return
        if refusal is not None and not refusal.report:
            _log.warning(
                "dead letter {} refused by host {} on {} not reported to {!r}: a security refusal ({})",
                dead.message_id,
                refusal.host,
                refusal.queue,
                dead.sender,
                refusal.reason,
            )
            self._count(dead.reason, reported=False)
            self._link.ack(delivery)
            return
        try:
            self._report(dead)
        except BrokerUnavailableError as exc:
            _log.warning("could not report dead letter {} yet ({}); the broker redelivers it", dead.message_id, exc)
            return
        except EventHubError as exc:
            _log.warning(
                "dead letter {} ({}) could not be reported to {}: {}", dead.message_id, dead.reason, dead.sender, exc
            )
            self._count(dead.reason, reported=False)
            self._link.ack(delivery)
            return
        _log.info(
            "dead letter {} ({}, queue {}, signed by {}) reported to {}",
            dead.message_id,
            dead.reason,
            dead.queue,
            host,
            dead.sender,
        )
        self._count(dead.reason, reported=True)
        self._link.ack(delivery)

    def _count(self, reason: str, *, reported: bool) -> None:
        self.stats.count(reason, reported)
        self._counter.add(1, {"reason": reason, "reported": str(reported).lower()})
