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

Caps (max length in messages and bytes, message TTL, orphan expiry, overflow behaviour
that dead-letters to ``fleet.dlx``) are **queue arguments** every host declares its
inboxes with (:func:`inbox_arguments`, from its :class:`InboxCaps`), so a fleet started
as documented has capped inboxes with nothing else to run. An inbox that already exists
with other arguments (an older host, other caps) cannot be redeclared: the broker answers
``PRECONDITION_FAILED`` and closes the channel, so hosts declare inboxes on a channel of
their own (:mod:`~orkeon_actors.hub.amqp.inbox_probe`), warn and keep using the inbox as
it is. :func:`inbox_policy` gives the same caps as **policies** (set with ``rabbitmqctl``
by ``orkeon fleet caps --apply``): a policy caps such an inbox in place (with both, the
lower bound wins). Inboxes are classic queues because quorum queues ignore
``reject-publish-dlx``.

Declarations are idempotent; :class:`Declarer` chains them through pika's callbacks on
the I/O thread (see :class:`~orkeon_actors.hub.amqp.link.BrokerLink`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId

if TYPE_CHECKING:  # pika only in annotations: the caps and names import without the amqp extra
    import pika.channel

__all__ = [
    "CONTROL_EXCHANGE",
    "DLQ",
    "DLX",
    "OVERFLOW",
    "MSG_EXCHANGE",
    "ROSTER_EXCHANGE",
    "TOPIC_FAN_IN",
    "Declarer",
    "DeclareInboxes",
    "InboxCaps",
    "RECEIPTS_EXPIRE_MS",
    "RECEIPT_TTL_MS",
    "answer_key",
    "answers_queue",
    "control_queue",
    "inbox_arguments",
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


def _at_least(minimum: int) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
            raise InvalidArgumentError(f"InboxCaps.{attribute.name} must be an integer >= {minimum}, got {value!r}")

    return check


@attrs.frozen
class InboxCaps:
    """The bounds of every inbox a host declares (:func:`inbox_arguments`), and of the
    policies ``orkeon fleet caps --apply`` sets (:func:`inbox_policy`).

    ``max_length`` messages and ``max_length_bytes`` bytes of bodies at most (``None``:
    no byte bound); a publish over either is refused back to its publisher (its ``post``
    raises ``BrokerNackError``) and dead-lettered to ``fleet.dlx``, so its sender gets a
    ``DeliveryFailed`` (``reject-publish-dlx``). ``message_ttl_ms``: an unconsumed message
    dead-letters after it (``DeliveryFailed``, reason ``expired``). ``orphan_expiry_ms``:
    an inbox nobody consumed for that long is deleted. ``dlq_max_length`` bounds
    ``fleet.dlq`` (policy only). Bad values raise ``InvalidArgumentError``.
    """

    max_length: int = attrs.field(default=100_000, validator=_at_least(0))
    max_length_bytes: int | None = attrs.field(default=1 << 30, validator=_at_least(0))
    message_ttl_ms: int = attrs.field(default=7 * 24 * 3600 * 1000, validator=_at_least(0))
    orphan_expiry_ms: int = attrs.field(default=30 * 24 * 3600 * 1000, validator=_at_least(1))
    dlq_max_length: int = attrs.field(default=1_000_000, validator=_at_least(0))


OVERFLOW: Final = "reject-publish-dlx"
"""What an inbox does with a publish over its cap: refuse it (the publisher gets a
``basic.nack``) and dead-letter it (the sender gets a ``DeliveryFailed``)."""


def inbox_arguments(caps: InboxCaps = InboxCaps()) -> dict[str, Any]:
    """The arguments every inbox is declared with: a classic queue dead-lettering to
    ``fleet.dlx``, bounded by ``caps``."""
    arguments: dict[str, Any] = {
        "x-queue-type": "classic",
        "x-dead-letter-exchange": DLX,
        "x-max-length": caps.max_length,
        "x-overflow": OVERFLOW,
        "x-message-ttl": caps.message_ttl_ms,
        "x-expires": caps.orphan_expiry_ms,
    }
    if caps.max_length_bytes is not None:
        arguments["x-max-length-bytes"] = caps.max_length_bytes
    return arguments


def inbox_policy(caps: InboxCaps = InboxCaps()) -> list[tuple[str, str, dict[str, Any]]]:
    """The policies an operator applies (``rabbitmqctl set_policy NAME PATTERN JSON
    --apply-to queues``): ``(name, pattern, definition)`` for the inboxes and the DLQ.
    The inboxes' policy carries :func:`inbox_arguments`' caps, so it caps in place an
    inbox declared without them."""
    inboxes: dict[str, Any] = {
        "max-length": caps.max_length,
        "overflow": OVERFLOW,
        "message-ttl": caps.message_ttl_ms,
        "expires": caps.orphan_expiry_ms,
    }
    if caps.max_length_bytes is not None:
        inboxes["max-length-bytes"] = caps.max_length_bytes
    return [
        ("orkeon-inboxes", r"^inbox\.", inboxes),
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


Step = Callable[["pika.channel.Channel", Callable[[], None]], None]


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


DeclareInboxes = Callable[[list[tuple[str, dict[str, Any]]], "pika.channel.Channel", Callable[[], None]], None]
"""Declares ``(queue, arguments)`` inboxes on the I/O thread, given the working channel,
then calls ``done`` (:class:`~orkeon_actors.hub.amqp.inbox_probe.InboxProbe`)."""


class Declarer:
    """Chains declarations on a channel, each started from the previous one's callback,
    then calls ``done``. Build it with the methods below, run it with :meth:`run` on the
    I/O thread. Inboxes are declared with ``caps`` (:func:`inbox_arguments`; default
    :class:`InboxCaps`)."""

    def __init__(self, caps: InboxCaps | None = None) -> None:
        self.caps = caps if caps is not None else InboxCaps()
        self._steps: list[Step] = []
        self._last: dict[int, Step] = {}
        """The awaited form of a ``nowait`` step, by index: used when it ends the run."""
        self._inboxes: list[tuple[str, dict[str, Any]]] = []
        """Inbox queues to declare (with their cap arguments) before the steps."""

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
        """A durable inbox for ``address`` capped by :attr:`caps`, bound to its mailbox
        key (and ``extra_keys``: topic patterns its owner subscribes to).

        The queue is declared before every other step (by :meth:`run`'s
        ``declare_inboxes`` when given: a channel of its own, where an existing inbox
        with other arguments is told apart without closing the working channel). The
        bindings are sent without awaiting each reply (``nowait``): the declarations of
        many inboxes go out back to back instead of one broker round trip after the
        other (2,000 of them, serialised, took over 10 s on a loaded 2-core machine).
        :meth:`run`'s last step is always awaited, and the broker answers it only after
        everything before it on the channel, so ``done`` still means declared."""
        queue = inbox_queue(address)
        self._inboxes.append((queue, inbox_arguments(self.caps)))
        keys = (mailbox_key(address), *extra_keys)
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

    def run(
        self,
        channel: pika.channel.Channel,
        done: Callable[[], None],
        declare_inboxes: DeclareInboxes | None = None,
    ) -> None:
        """Run the steps in order on the I/O thread, then ``done`` (once the broker
        answered the last one, hence all of them). The inbox queues go first: through
        ``declare_inboxes`` when given, else on ``channel`` itself (where an existing
        inbox with other arguments closes it: ``PRECONDITION_FAILED``)."""
        steps = list(self._steps)
        if steps and len(steps) - 1 in self._last:
            steps[-1] = self._last[len(steps) - 1]
        inboxes = list(self._inboxes)
        if declare_inboxes is None:
            declares = [_send("queue_declare", queue, durable=True, arguments=args) for queue, args in inboxes]
            if declares and not steps:
                queue, args = inboxes[-1]
                declares[-1] = _call("queue_declare", queue, durable=True, arguments=args)
            steps = declares + steps
            inboxes = []

        def advance(index: int) -> None:
            if index == len(steps):
                done()
                return
            steps[index](channel, lambda: advance(index + 1))

        if inboxes:
            assert declare_inboxes is not None
            declare_inboxes(inboxes, channel, lambda: advance(0))
        else:
            advance(0)
