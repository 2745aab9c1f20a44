"""An operator's view of a running fleet, without writing a host program: what
``orkeon fleet`` runs (``docs/distributed.md``, "Operating a fleet").

**Who the operator is.** The operator's process joins the fleet as a host of its own,
with an id of its own (``operator`` unless told otherwise, :data:`OPERATOR_ENV`) that
must have a key in the fleet's keys file, the same file every host holds: a host accepts
what that key signs exactly as it accepts another host's messages, no new mechanism. It
serves no crews (it announces no kinds), keeps its replay set in a throw-away store, and
leaves the roster one presence TTL after it exits. Its posts come from
``agent://orkeon-fleet/<operator id>`` (:data:`OPERATOR_CREW`), signed by the operator
id; its spawn and stop requests are signed by it too, so a host's log names the operator
that asked. Revoking the operator is removing its key from the keys file.

:class:`OperatorSession` is that host: :meth:`~OperatorSession.roster`,
:meth:`~OperatorSession.post`, :meth:`~OperatorSession.spawn`,
:meth:`~OperatorSession.stop`, :meth:`~OperatorSession.dead_letters` (browsed, not
consumed), :meth:`~OperatorSession.requeue` and :meth:`~OperatorSession.inboxes`.

Guarantees:

* **Heard before it answers.** Presence arrives by heartbeat: a session listens
  ``listen`` seconds (at least one heartbeat interval of the fleet's hosts) before it
  reports the roster, and before a spawn, stop or post it waits (within ``listen``)
  until the host or crew it names is heard of; then an unknown host or crew is a typed
  error naming the hosts it heard.
* **Dead letters are browsed, not taken.** ``fleet.dlq`` is read with ``basic.get``
  unacknowledged on a channel of its own, which is then closed: the broker puts every
  message back where it was. Only :meth:`~OperatorSession.requeue` acknowledges one,
  after the broker confirmed its copy republished to the exchange and routing key it
  was first published with.
* **Caps over AMQP as far as AMQP goes.** An inbox's length and consumers are read with
  a passive ``queue.declare``; its cap is a policy, which AMQP cannot read or set:
  :func:`inbox_policies` reads them with ``rabbitmqctl`` when it is on ``PATH`` (the
  broker's machine) and says so otherwise.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import pika
import pika.adapters.blocking_connection
import pika.exceptions

from orkeon_actors.errors import (
    BrokerAccessError,
    BrokerUnavailableError,
    FleetControlError,
    InvalidMailboxAddressError,
    SignatureError,
)
from orkeon_actors.fleet.broker_admin import rabbitmqctl_available
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.fleet.dead_letters import DeadLetter
from orkeon_actors.fleet.gateway import SENDER_PREFIX
from orkeon_actors.fleet.inbox_caps import inbox_caps
from orkeon_actors.fleet.refusals import REFUSAL, REFUSAL_SIGNATURE, REFUSED_BY, REFUSED_ON, REPORT
from orkeon_actors.fleet.roster import GATEWAY
from orkeon_actors.fleet.signing import HostKeys, Verifier
from orkeon_actors.hub.amqp.consumers import Delivery, delivery_of
from orkeon_actors.hub.amqp.topology import DLQ, MSG_EXCHANGE, inbox_queue
from orkeon_actors.hub.amqp.uri import connection_parameters, redacted
from orkeon_actors.model.address import MailboxAddress

if TYPE_CHECKING:
    from orkeon_actors.fleet.hub import AmqpEventHub
    from orkeon_actors.fleet.operations import Fleet
    from orkeon_actors.runtime import Runtime

__all__ = [
    "DEFAULT_OPERATOR",
    "OPERATOR_CREW",
    "OPERATOR_ENV",
    "DeadLetterView",
    "HostView",
    "InboxView",
    "OperatorSession",
]

OPERATOR_ENV: Final = "ORKEON_FLEET_OPERATOR"
"""The environment variable naming the operator's id (default :data:`DEFAULT_OPERATOR`)."""
DEFAULT_OPERATOR: Final = "operator"
OPERATOR_CREW: Final = "orkeon-fleet"
"""The crew id an operator's posts come from: ``agent://orkeon-fleet/<operator id>``."""
_DROPPED_ON_REQUEUE: Final = (
    *(f"x-{when}-death-{what}" for when in ("first", "last") for what in ("reason", "queue", "exchange")),
    "x-death",
    *(REFUSED_BY, REFUSED_ON, REFUSAL, REPORT, REFUSAL_SIGNATURE),
)
"""The headers the broker or a refusing gateway added: a requeued copy goes without them."""


@attrs.frozen
class HostView:
    """One host on the roster: ``age_s``, how many seconds ago this session last
    received a complete presence round of it (measured here: hosts may run other
    presence timings than the operator); ``expires_in_s``, how long its presence lasts
    without another heartbeat (its own TTL); the crew kinds it can spawn, its crews and
    their mailboxes."""

    host: str
    age_s: float
    expires_in_s: float
    kinds: tuple[str, ...]
    crews: dict[str, list[str]]
    mailboxes: list[str]


@attrs.frozen
class DeadLetterView:
    """One message of ``fleet.dlq``: why it died (``reason``: ``maxlen``, ``expired``,
    ``rejected``; ``detail``: a refusing gateway's reason, ``refused_by`` that host), on
    which ``queue``, and who ``signed_by`` it (empty, with ``signature`` saying why, when
    no key of the fleet did)."""

    message_id: str
    reason: str
    queue: str
    detail: str
    refused_by: str
    sender: str
    recipient: str
    signed_by: str
    signature: str
    exchange: str
    routing_key: str
    size: int


@attrs.frozen
class InboxView:
    """One inbox queue: its ``messages`` waiting, its ``consumers``, the policy applying
    to it, the ``max-length`` it was declared with and the one in force (the lower of
    the two), and whether it is ``capped`` (``None`` for each: not known over AMQP,
    which reads neither arguments nor policies; else ``None`` for a bound: none)."""

    mailbox: str
    host: str
    queue: str
    messages: int
    consumers: int
    policy: str | None
    declared_max_length: int | None
    max_length: int | None
    capped: bool | None


class OperatorSession:
    """The operator's host (see the module docstring); a context manager.

    ``url`` the broker's URI, ``keys`` the fleet's keys (holding ``operator``'s),
    ``listen`` how long to listen for presence, ``connect_timeout`` the connect bound.
    """

    def __init__(
        self,
        url: str,
        keys: HostKeys,
        operator: str = DEFAULT_OPERATOR,
        *,
        listen: float = 2.5,
        connect_timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.operator = operator
        self.listen = listen
        self._keys = keys
        self._config = FleetConfig(url, operator, keys, connect_timeout=connect_timeout)
        self._started = 0.0
        self._rounds: dict[str, tuple[int, float]] = {}
        """Per host: how many complete presence rounds were heard, and when the count last rose."""
        self._runtime: Runtime | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> OperatorSession:
        from orkeon_actors.runtime import Runtime

        self._scratch = tempfile.TemporaryDirectory(prefix="orkeon-fleet-")
        try:
            self._runtime = Runtime.start(store=str(Path(self._scratch.name) / "operator.db"), fleet=self._config)
        except BaseException:
            self._scratch.cleanup()
            raise
        self._started = time.monotonic()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._runtime is not None:
            self._runtime.stop()
        if self._scratch is not None:
            self._scratch.cleanup()

    @property
    def hub(self) -> AmqpEventHub:
        from orkeon_actors.fleet.hub import AmqpEventHub

        hub = self._runtime.hub if self._runtime is not None else None
        assert isinstance(hub, AmqpEventHub), "use the session in a with block"
        return hub

    @property
    def fleet(self) -> Fleet:
        assert self._runtime is not None and self._runtime.fleet is not None, "use the session in a with block"
        return self._runtime.fleet

    # -- the roster -----------------------------------------------------------------------

    def _heard_until(self, done: Callable[[], bool]) -> None:
        """Wait until ``done()`` or ``listen`` seconds after the session started."""
        deadline = self._started + self.listen
        while not self._track() and not done() and time.monotonic() < deadline:
            time.sleep(0.02)

    def _track(self) -> bool:
        """Note when each host's latest complete round arrived (always ``False``)."""
        roster = self.hub.gateway.roster
        now = time.monotonic()
        for host in roster.hosts():
            count = roster.rounds_from(host)
            if self._rounds.get(host, (-1, now))[0] != count:
                self._rounds[host] = (count, now)
        return False

    def roster(self) -> list[HostView]:
        """Every host heard (this operator's own presence left out), after listening."""
        self._heard_until(lambda: False)
        return self._hosts()

    def _hosts(self) -> list[HostView]:
        roster = self.hub.gateway.roster
        self._track()
        now, now_ms = time.monotonic(), int(time.time() * 1000)
        kinds = roster.hosts()
        expiries = {e.host: e.expires_at for e in roster.entries() if e.entity == f"{GATEWAY}@{e.host}"}
        mailboxes: dict[str, list[str]] = {host: [] for host in kinds}
        for entry in roster.entries():
            if not entry.entity.startswith((GATEWAY, SENDER_PREFIX)):
                mailboxes.setdefault(entry.host, []).append(entry.entity)
        views = []
        for host in sorted(mailboxes):
            if host == self.operator:
                continue
            crews: dict[str, list[str]] = {}
            for mailbox in mailboxes[host]:
                crew = _crew_of(mailbox)
                if crew is not None:
                    crews.setdefault(crew, []).append(mailbox)
            age = now - self._rounds.get(host, (0, now))[1]
            expires_in = max(0.0, (expiries.get(host, now_ms) - now_ms) / 1000)
            views.append(
                HostView(host, round(age, 2), round(expires_in, 2), kinds.get(host, ()), crews, mailboxes[host])
            )
        return views

    def _heard_hosts(self) -> str:
        return ", ".join(f"{view.host} (heard {view.age_s:.1f} s ago)" for view in self._hosts()) or "none"

    # -- acting ---------------------------------------------------------------------------

    def post(self, to: str, payload: bytes, *, confirm: bool = False) -> tuple[str, str]:
        """Post ``payload`` to mailbox ``to`` from ``agent://orkeon-fleet/<operator>``:
        the message id and the host holding the mailbox (``confirm``: once that host
        holds the message, its DELIVERED receipt, else once the broker has it)."""
        address = MailboxAddress.parse(to)
        self._heard_until(lambda: self.hub.where(address) is not None)
        message = self.hub.bind(OPERATOR_CREW, self.operator).post(address, payload, confirm_delivery=confirm)
        return str(message.id), self.hub.where(address) or "?"

    def spawn(self, kind: str, host: str, *, crew_id: str | None = None, timeout: float = 30.0) -> str:
        """Start a crew of ``kind`` on ``host``: its id once it runs and is announced."""
        self._heard_until(lambda: any(view.host == host for view in self._hosts()))
        if not any(view.host == host for view in self._hosts()):
            raise FleetControlError(
                f"host {host!r} is not on the roster after {self.listen} s of listening (hosts heard: "
                f"{self._heard_hosts()}): check the host id, or start it with `orkeon host`"
            )
        return self.fleet.spawn(kind, host=host, crew_id=crew_id, timeout=timeout)

    def stop(self, crew_id: str, *, timeout: float = 30.0) -> tuple[str, str]:
        """End crew ``crew_id`` on the host announcing it: its id and that host."""
        self._heard_until(lambda: self._host_of(crew_id) is not None)
        host = self._host_of(crew_id)
        if host is None:
            raise FleetControlError(
                f"no host announces crew {crew_id!r} after {self.listen} s of listening (hosts heard: "
                f"{self._heard_hosts()}): `orkeon fleet roster` lists the crews"
            )
        return self.fleet.stop(crew_id, timeout=timeout), host

    def _host_of(self, crew_id: str) -> str | None:
        return next((view.host for view in self._hosts() if crew_id in view.crews), None)

    # -- dead letters ---------------------------------------------------------------------

    def dead_letters(self, limit: int = 1000) -> list[DeadLetterView]:
        """The first ``limit`` messages of ``fleet.dlq``, oldest first, left in place."""
        verifier = Verifier(self._keys, lambda _sender: None, lambda: 0)
        with _dlq_channel(self.url) as channel:
            return [_view(delivery, verifier) for delivery in _browse(channel, limit)]

    def requeue(self, message_id: str, *, limit: int = 1000) -> DeadLetterView:
        """Publish dead letter ``message_id`` again, as it was first published (its
        signed headers and body, the dead-letter and refusal headers removed), and
        remove it from ``fleet.dlq`` once the broker confirmed the copy. A message this
        operator signed has its sender announced again first, so the recipient's
        gateway accepts it. ``FleetControlError`` if no message of the first ``limit``
        has that id."""
        verifier = Verifier(self._keys, lambda _sender: None, lambda: 0)
        with _dlq_channel(self.url) as channel:
            for delivery in _browse(channel, limit):
                if str(delivery.headers.get("message_id", delivery.message_id)) != message_id:
                    continue
                view = _view(delivery, verifier)
                if view.signed_by == self.operator:
                    roster = self.hub.gateway.roster
                    roster.add([SENDER_PREFIX + view.sender])
                    roster.heartbeat()
                headers = {k: v for k, v in delivery.headers.items() if k not in _DROPPED_ON_REQUEUE}
                channel.confirm_delivery()
                channel.basic_publish(
                    view.exchange,
                    view.routing_key,
                    delivery.body,
                    pika.BasicProperties(
                        message_id=delivery.message_id,
                        headers=headers,
                        delivery_mode=pika.DeliveryMode.Persistent,
                        content_type="application/json",
                    ),
                    mandatory=True,
                )
                channel.basic_ack(delivery.delivery_tag)
                return view
        raise FleetControlError(
            f"no dead letter {message_id!r} among the first {limit} of {DLQ}: `orkeon fleet dlq` lists their ids"
        )

    # -- inboxes and caps -------------------------------------------------------------------

    def inboxes(self) -> list[InboxView]:
        """Every inbox of a mailbox on the roster: its length and consumers (AMQP), its
        declared cap, policy and cap in force (``rabbitmqctl``, when available; else
        ``None``: :func:`~orkeon_actors.fleet.inbox_caps.inbox_caps`)."""
        known = inbox_caps(vhost_of(self.url)) if rabbitmqctl_available() else {}
        views = []
        with _connection(self.url) as connection:
            for host in self.roster():
                for mailbox in host.mailboxes:
                    queue = inbox_queue(MailboxAddress.parse(mailbox))
                    channel = connection.channel()
                    try:
                        declared = channel.queue_declare(queue, passive=True)
                    except pika.exceptions.ChannelClosedByBroker as exc:
                        if exc.reply_code == 403:
                            raise _refused(queue, exc) from None
                        continue  # gone since the heartbeat named it
                    channel.close()
                    found = known.get(queue)
                    views.append(
                        InboxView(
                            mailbox,
                            host.host,
                            queue,
                            declared.method.message_count,
                            declared.method.consumer_count,
                            None if found is None else found.policy,
                            None if found is None else found.declared_max_length,
                            None if found is None else found.max_length,
                            None if found is None else found.max_length is not None,
                        )
                    )
        return views


def vhost_of(url: str) -> str:
    """The vhost the URI names (``/`` when it names none)."""
    return str(connection_parameters(url).virtual_host)


def _crew_of(mailbox: str) -> str | None:
    try:
        address = MailboxAddress.parse(mailbox)
    except InvalidMailboxAddressError:
        return None
    return str(address.crew_id) if address.crew_id is not None else None


def _view(delivery: Delivery, verifier: Verifier) -> DeadLetterView:
    dead = DeadLetter.of(delivery)
    try:
        signed_by, signature = verifier.signer_of(dead.headers, dead.body), "valid"
    except SignatureError as exc:
        signed_by, signature = "", str(exc)
    deaths = delivery.headers.get("x-death")
    first: Mapping[str, Any] = deaths[-1] if isinstance(deaths, list) and deaths else {}
    keys = first.get("routing-keys") or [delivery.routing_key]
    exchange = _text(first.get("exchange", MSG_EXCHANGE)) if first else MSG_EXCHANGE
    return DeadLetterView(
        dead.message_id,
        dead.reason,
        dead.queue,
        dead.detail,
        _text(delivery.headers.get(REFUSED_BY, "")),
        dead.sender,
        dead.recipient,
        signed_by,
        signature,
        exchange,
        _text(keys[0]),
        len(delivery.body),
    )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _browse(channel: pika.adapters.blocking_connection.BlockingChannel, limit: int) -> Iterator[Delivery]:
    """Up to ``limit`` messages of ``fleet.dlq``, unacknowledged (closing the channel
    puts back those not acknowledged)."""
    for _ in range(limit):
        try:
            method, properties, body = channel.basic_get(DLQ, auto_ack=False)
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code == 404:
                raise FleetControlError(
                    f"there is no {DLQ} on this vhost: no fleet host ever ran on it (check the URI's vhost)"
                ) from None
            raise _refused(DLQ, exc) from None
        if method is None:
            return
        yield delivery_of(DLQ, method, properties, body)


def _refused(resource: str, exc: pika.exceptions.ChannelClosedByBroker) -> BrokerAccessError:
    return BrokerAccessError(
        f"the broker refused this login access to {resource} ({exc.reply_code} {exc.reply_text}): an operator needs "
        "read and write permissions on the fleet's names (docs/distributed.md, per-host logins)"
    )


@contextmanager
def _connection(url: str) -> Iterator[pika.BlockingConnection]:
    try:
        connection = pika.BlockingConnection(connection_parameters(url))
    except (pika.exceptions.ProbableAuthenticationError, pika.exceptions.AuthenticationError) as exc:
        raise BrokerAccessError(
            f"the broker at {redacted(url)} refused the login ({exc}): check the URI's user and password"
        ) from None
    except pika.exceptions.ProbableAccessDeniedError as exc:
        raise BrokerAccessError(
            f"the broker at {redacted(url)} refused the vhost ({exc}): check the URI's vhost and the login's "
            "permissions (rabbitmqctl set_permissions -p VHOST USER ...)"
        ) from None
    except pika.exceptions.AMQPConnectionError as exc:
        raise BrokerUnavailableError(
            f"cannot reach the broker at {redacted(url)} ({type(exc).__name__}: {exc}): is it running, and is the "
            "URI's host and port right?"
        ) from None
    try:
        yield connection
    finally:
        if connection.is_open:
            connection.close()


@contextmanager
def _dlq_channel(url: str) -> Iterator[pika.adapters.blocking_connection.BlockingChannel]:
    """A channel of its own for browsing ``fleet.dlq``: closed at the end, which
    requeues every message it got and did not acknowledge."""
    with _connection(url) as connection:
        channel = connection.channel()
        try:
            yield channel
        finally:
            if channel.is_open:
                channel.close()
