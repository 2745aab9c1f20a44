"""The fleet's AMQP topology: exchange and queue names, routing keys, declarations.

Names follow the cross-host messaging design (its §3-§4):

========================  ======  ===============================================
``fleet.msg``             topic   every entity-to-entity message and every topic
                                  publish; routing key = recipient or topic
``fleet.roster``          topic   presence heartbeats, key ``roster.<host>.<entity>``
``fleet.control``         direct  spawn / stop, key = target host id
``fleet.dlx``             fanout  dead letters of every inbox
``fleet.dlq``             queue   bound to ``fleet.dlx``; durable (capped by policy)
``inbox.<address>``       queue   one per local entity (agent, crew, client mailbox),
                                  durable classic queue, dead-lettering to ``fleet.dlx``
``control.<host>``        queue   durable, bound to ``fleet.control`` key ``<host>``
``control.<host>.replies``  queue exclusive, auto-delete: answers to ``<host>``'s requests
``roster.<host>``         queue   exclusive, auto-delete, bound to ``roster.#``
``topics.<host>``         queue   exclusive, auto-delete, bound ``topic.#`` and
                                  ``scoped.#``: the host's fan-in of every publish
``answers.<host>``        queue   exclusive, auto-delete, key ``answer.<host>``:
                                  replies to the requests ``<host>`` sent
``receipts.<host>``       queue   durable (expires unused), key ``receipt.<host>``:
                                  DELIVERED receipts for ``<host>``'s posts; kept
                                  while ``<host>``'s connection is down
========================  ======  ===============================================

Routing keys (:func:`mailbox_key`, :func:`topic_key`, :func:`scoped_topic_key`):

* a mailbox's key is ``mbox.`` + its canonical address (``mbox.agent://billing/scorer``):
  inbox bindings are exact, so the address's own characters need no escaping;
* a global topic publish's key is ``topic.`` + the topic, and a subscription binds
  ``topic.`` + its pattern, so ``*`` and ``#`` mean on the broker what they mean in
  memory (one word, zero or more);
* a publish scoped to crew X (spec §10.1) is keyed ``scoped.`` + X + ``.`` + topic, with
  the dots of X escaped (``%2E``; ``%`` never occurs in an id), so that only a binding
  made for crew X can match it: the scoping is enforced by the bindings themselves.

Caps (max length, message TTL, orphan expiry, overflow behaviour) are set by **policy**
(:func:`inbox_policy`), never by queue arguments: redeclaring a queue with other
arguments fails with ``PRECONDITION_FAILED``, a policy changes in place. Inboxes are
classic queues because quorum queues ignore ``reject-publish-dlx``.

Declarations are idempotent; :class:`Declarer` chains them through pika's callbacks on
the I/O thread (see :class:`~orkeon_actors.hub.amqp.link.BrokerLink`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs
import pika.channel

from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId

__all__ = [
    "CONTROL_EXCHANGE",
    "DLQ",
    "DLX",
    "MSG_EXCHANGE",
    "ROSTER_EXCHANGE",
    "TOPIC_FAN_IN",
    "Declarer",
    "InboxCaps",
    "RECEIPTS_EXPIRE_MS",
    "RECEIPT_TTL_MS",
    "answer_key",
    "answers_queue",
    "control_queue",
    "inbox_policy",
    "inbox_queue",
    "mailbox_key",
    "receipt_key",
    "receipts_queue",
    "replies_key",
    "replies_queue",
    "roster_queue",
    "scoped_topic_key",
    "topic_key",
    "topics_queue",
]

MSG_EXCHANGE: Final = "fleet.msg"
ROSTER_EXCHANGE: Final = "fleet.roster"
CONTROL_EXCHANGE: Final = "fleet.control"
DLX: Final = "fleet.dlx"
DLQ: Final = "fleet.dlq"
MAX_KEY_BYTES: Final = 255
"""AMQP's limit on a routing key (a short string)."""


def mailbox_key(address: MailboxAddress) -> str:
    return "mbox." + str(address)


def inbox_queue(address: MailboxAddress) -> str:
    return "inbox." + str(address)


def topic_key(topic: str) -> str:
    """Routing key (or binding pattern) of a global publish on ``topic``."""
    return "topic." + topic


def scoped_topic_key(crew: CrewId, topic: str) -> str:
    """Routing key (or binding pattern) of a publish on ``topic`` scoped to ``crew``."""
    return "scoped." + str(crew).replace(".", "%2E") + "." + topic


def topics_queue(host: str) -> str:
    """``host``'s fan-in of every topic publish (exclusive, auto-delete)."""
    return "topics." + host


def answers_queue(host: str) -> str:
    """Where replies to ``host``'s requests arrive (exclusive, auto-delete)."""
    return "answers." + host


def answer_key(host: str) -> str:
    return "answer." + host


def receipts_queue(host: str) -> str:
    """Where the DELIVERED receipts of ``host``'s posts arrive: durable, so that a receipt
    sent while ``host``'s connection is down waits for its reconnect."""
    return "receipts." + host


def receipt_key(host: str) -> str:
    return "receipt." + host


RECEIPTS_EXPIRE_MS: Final = 24 * 3600 * 1000
"""A ``receipts.<host>`` queue unused (no consumer, no redeclare) this long is deleted by
the broker (``x-expires``): a host id that is gone leaves nothing behind."""

RECEIPT_TTL_MS: Final = 300_000
"""How long a receipt waits in ``receipts.<host>`` for its poster (longer than any
sensible ``FleetConfig.delivery_timeout``; an older one has nobody waiting)."""

TOPIC_FAN_IN: Final = ("topic.#", "scoped.#")
"""The bindings of a topics queue: every global and every scoped publish."""


def control_queue(host: str) -> str:
    return "control." + host


def replies_queue(host: str) -> str:
    """Where answers to ``host``'s control requests arrive (exclusive, auto-delete)."""
    return control_queue(host) + ".replies"


def replies_key(host: str) -> str:
    return host + ".replies"


def roster_queue(host: str) -> str:
    return "roster." + host


@attrs.frozen
class InboxCaps:
    """The bounds of every inbox, applied by policy (see :func:`inbox_policy`).

    ``max_length`` messages at most (overflow is refused back to the publisher and
    dead-lettered, ``reject-publish-dlx``), ``message_ttl_ms`` after which an unconsumed
    message dead-letters, ``orphan_expiry_ms`` after which an inbox nobody consumes is
    deleted, ``dlq_max_length`` for ``fleet.dlq`` itself.
    """

    max_length: int = 100_000
    message_ttl_ms: int = 7 * 24 * 3600 * 1000
    orphan_expiry_ms: int = 30 * 24 * 3600 * 1000
    dlq_max_length: int = 1_000_000


def inbox_policy(caps: InboxCaps = InboxCaps()) -> list[tuple[str, str, dict[str, Any]]]:
    """The policies an operator applies (``rabbitmqctl set_policy NAME PATTERN JSON
    --apply-to queues``): ``(name, pattern, definition)`` for the inboxes and the DLQ."""
    return [
        (
            "orkeon-inboxes",
            r"^inbox\.",
            {
                "max-length": caps.max_length,
                "overflow": "reject-publish-dlx",
                "message-ttl": caps.message_ttl_ms,
                "expires": caps.orphan_expiry_ms,
            },
        ),
        # fleet.dlq and the reporters' copy, fleet.dlq.reports: both capped (anything with
        # broker write access could otherwise fill them), oldest dropped first
        ("orkeon-dlq", r"^fleet\.dlq(\.reports)?$", {"max-length": caps.dlq_max_length, "overflow": "drop-head"}),
    ]


def policy_commands(vhost: str, caps: InboxCaps = InboxCaps()) -> list[list[str]]:
    """:func:`inbox_policy` as ``rabbitmqctl`` command lines for ``vhost``."""
    return [
        ["rabbitmqctl", "set_policy", "-p", vhost, name, pattern, json.dumps(definition), "--apply-to", "queues"]
        for name, pattern, definition in inbox_policy(caps)
    ]


Step = Callable[[pika.channel.Channel, Callable[[], None]], None]


def _call(method: str, *args: Any, **kwargs: Any) -> Step:
    """A step calling ``channel.<method>(*args, **kwargs)`` and continuing on its reply."""

    def step(channel: pika.channel.Channel, next_step: Callable[[], None]) -> None:
        getattr(channel, method)(*args, callback=lambda _frame: next_step(), **kwargs)

    return step


def _send(method: str, *args: Any, **kwargs: Any) -> Step:
    """A step sending ``channel.<method>(*args, **kwargs)`` with ``nowait`` (no reply
    awaited) and continuing at once. The broker still handles a channel's methods in
    order, so the reply to a later synchronous step means this one was done; a failure
    closes the channel (as a failed synchronous step does)."""

    def step(channel: pika.channel.Channel, next_step: Callable[[], None]) -> None:
        getattr(channel, method)(*args, **kwargs)
        next_step()

    return step


class Declarer:
    """Chains declarations on a channel, each started from the previous one's callback,
    then calls ``done``. Build it with the methods below, run it with :meth:`run` on the
    I/O thread."""

    def __init__(self) -> None:
        self._steps: list[Step] = []
        self._last: dict[int, Step] = {}
        """The awaited form of a ``nowait`` step, by index: used when it ends the run."""

    def shared(self) -> Declarer:
        """The shared exchanges and the dead-letter queue."""
        for name, kind in (
            (MSG_EXCHANGE, "topic"),
            (ROSTER_EXCHANGE, "topic"),
            (CONTROL_EXCHANGE, "direct"),
            (DLX, "fanout"),
        ):
            self._steps.append(_call("exchange_declare", name, kind, durable=True))
        self._steps.append(_call("queue_declare", DLQ, durable=True))
        self._steps.append(_call("queue_bind", DLQ, DLX, ""))
        return self

    def inbox(self, address: MailboxAddress, extra_keys: Sequence[str] = ()) -> Declarer:
        """A durable inbox for ``address``, bound to its mailbox key (and ``extra_keys``:
        topic patterns its owner subscribes to).

        Sent without awaiting each reply (``nowait``): the declarations of many inboxes
        go out back to back instead of one broker round trip after the other (2,000 of
        them, serialised, took over 10 s on a loaded 2-core machine). :meth:`run`'s last
        step is always awaited, and the broker answers it only after everything before
        it on the channel, so ``done`` still means declared."""
        queue = inbox_queue(address)
        arguments = {"x-queue-type": "classic", "x-dead-letter-exchange": DLX}
        keys = (mailbox_key(address), *extra_keys)
        self._steps.append(_send("queue_declare", queue, durable=True, arguments=arguments))
        for key in keys:
            self._steps.append(_send("queue_bind", queue, MSG_EXCHANGE, key))
        self._last[len(self._steps) - 1] = _call("queue_bind", queue, MSG_EXCHANGE, keys[-1])
        return self

    def control(self, host: str) -> Declarer:
        """``host``'s durable control queue and its exclusive queue for answers."""
        queue = control_queue(host)
        self._steps.append(_call("queue_declare", queue, durable=True, arguments={"x-dead-letter-exchange": DLX}))
        self._steps.append(_call("queue_bind", queue, CONTROL_EXCHANGE, host))
        replies = replies_queue(host)
        self._steps.append(_call("queue_declare", replies, exclusive=True, auto_delete=True))
        self._steps.append(_call("queue_bind", replies, CONTROL_EXCHANGE, replies_key(host)))
        return self

    def receipts(self, host: str) -> Declarer:
        """``host``'s durable receipts queue (its expiry is a fixed argument, never changed:
        redeclaring it is idempotent)."""
        queue = receipts_queue(host)
        self._steps.append(_call("queue_declare", queue, durable=True, arguments={"x-expires": RECEIPTS_EXPIRE_MS}))
        self._steps.append(_call("queue_bind", queue, MSG_EXCHANGE, receipt_key(host)))
        return self

    def listener(self, queue: str, keys: Sequence[str]) -> Declarer:
        """An exclusive, auto-delete queue bound to ``fleet.msg`` with ``keys``: live-only
        traffic of one process (its topic fan-in, the answers to its requests)."""
        self._steps.append(_call("queue_declare", queue, exclusive=True, auto_delete=True))
        for key in keys:
            self._steps.append(_call("queue_bind", queue, MSG_EXCHANGE, key))
        return self

    def unbind_inbox(self, address: MailboxAddress) -> Declarer:
        """Take ``address``'s inbox off its mailbox key: later posts to it are unroutable
        (their poster is told), what the inbox still holds drains to its consumer."""
        self._steps.append(_call("queue_unbind", inbox_queue(address), MSG_EXCHANGE, mailbox_key(address)))
        return self

    def roster(self, host: str) -> Declarer:
        queue = roster_queue(host)
        self._steps.append(_call("queue_declare", queue, exclusive=True, auto_delete=True))
        self._steps.append(_call("queue_bind", queue, ROSTER_EXCHANGE, "roster.#"))
        return self

    def run(self, channel: pika.channel.Channel, done: Callable[[], None]) -> None:
        """Run the steps in order on the I/O thread, then ``done`` (once the broker
        answered the last one, hence all of them)."""
        steps = list(self._steps)
        if steps and len(steps) - 1 in self._last:
            steps[-1] = self._last[len(steps) - 1]

        def advance(index: int) -> None:
            if index == len(steps):
                done()
                return
            steps[index](channel, lambda: advance(index + 1))

        advance(0)
