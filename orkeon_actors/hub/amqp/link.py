"""One connection to RabbitMQ, on one I/O thread: publisher confirms, consumers, reconnects.

:class:`BrokerLink` owns a pika ``SelectConnection`` and the single thread that runs its
I/O loop (pika connections are not thread-safe; every other thread talks to it through
``add_callback_threadsafe``). It is the only module of the distributed tier that touches
pika (with :mod:`~orkeon_actors.hub.amqp.consumers`, which keeps its consumers on
channels they share). Guarantees:

* **Confirmed publishes.** :meth:`BrokerLink.publish` returns a future that completes
  once the broker confirmed the message (``basic.ack``); it fails with
  ``UnroutableError`` if the broker returned a ``mandatory`` message no queue was bound
  to, and with ``BrokerNackError`` on a ``basic.nack``. Confirms are windowed: publishing
  never waits for an earlier confirm.
* **Nothing accepted is lost across a reconnect.** A publish the broker had not confirmed
  when the connection dropped is published again, with the same ``message_id``, once the
  link is back (at-least-once: receivers deduplicate by message id). A publish made while
  the broker is unreachable waits for the reconnect; the caller bounds that wait with its
  own timeout (:meth:`BrokerLink.publish_and_wait` raises ``BrokerUnavailableError``).
* **Consumers survive reconnects.** A consumer registered with :meth:`consume` is
  re-established (same queue, prefetch, exclusivity) after every reconnect, once the
  ``on_connected`` hook redeclared the topology. Deliveries of the old connection are
  void: acking them is a no-op, the broker redelivers them (``redelivered`` set).
* **Not capped by ``channel_max``.** Consumers share channels, up to
  :data:`~orkeon_actors.hub.amqp.consumers.PER_CHANNEL` each, each keeping its own
  prefetch: one connection holds far more consumers than the broker's ``channel_max``
  (2,047 by default).
* **Exclusive means exclusive.** A consumer refused because another connection holds the
  queue exclusively fails its :meth:`consume` with ``ExclusiveConsumerError`` (a second
  gateway for one host fails loudly) instead of retrying.
* **Reconnect with backoff.** A lost connection is retried with exponential backoff
  (``backoff`` doubling up to ``max_backoff`` seconds) until :meth:`stop`.

Callbacks given to :meth:`consume` and ``on_connected`` run on the I/O thread: they must
be short and must not block (hand work to an actor); they may call :meth:`ack`,
:meth:`reject` and :meth:`publish`.

It is about 650 lines, over the project's 600: the connection's states, the confirm
window and the reconnect's replay of unconfirmed publishes share the I/O thread's state
and are read together; the broker refusals' typing (``BrokerAccessError``) is the next
part to move out, with issue #32's transport port, which reshapes this module.
"""

from __future__ import annotations

import itertools
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import attrs
import pika
import pika.channel
import pika.exceptions
import pika.frame
import pika.spec
from loguru import logger

from orkeon_actors.errors import (
    BrokerAccessError,
    BrokerNackError,
    BrokerTlsError,
    BrokerUnavailableError,
    ExclusiveConsumerError,
    UnroutableError,
)
from orkeon_actors.hub.amqp.consumers import PER_CHANNEL, Consumer, ConsumerChannels, Delivery
from orkeon_actors.hub.amqp.uri import connection_parameters, redacted

__all__ = ["BrokerLink", "Delivery", "Outgoing"]

_log = logger.bind(component="orkeon_actors.amqp")

_RESOURCE_LOCKED = 405
_ACCESS_REFUSED = 403


@attrs.frozen
class Outgoing:
    """One message to publish: where, what, and its AMQP properties."""

    exchange: str
    routing_key: str
    body: bytes
    message_id: str
    headers: dict[str, Any] = attrs.field(factory=dict)
    mandatory: bool = True
    expiration_ms: int | None = None
    persistent: bool = True

    def properties(self) -> pika.BasicProperties:
        return pika.BasicProperties(
            message_id=self.message_id,
            headers=dict(self.headers),
            delivery_mode=pika.DeliveryMode.Persistent if self.persistent else pika.DeliveryMode.Transient,
            content_type="application/json",
            expiration=None if self.expiration_ms is None else str(self.expiration_ms),
        )


@attrs.define
class _Pending:
    outgoing: Outgoing
    future: Future[None]
    returned: bool = False


class BrokerLink:
    """A connection to one broker (see the module docstring).

    ``url`` is an AMQP URI (``amqp://user:pass@host:port/vhost``, ``amqps://`` with TLS
    options in its query: :mod:`~orkeon_actors.hub.amqp.uri`); a malformed one raises
    ``InvalidArgumentError`` here, before any thread starts. ``on_connected(channel)`` runs
    on the I/O thread after every (re)connect, before publishes resume and consumers come back: declare the topology
    there, synchronously chained through pika callbacks, and call ``done()`` when it is
    declared (it receives the publishing channel and ``done``).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str = "orkeon",
        on_connected: Callable[[pika.channel.Channel, Callable[[], None]], None] | None = None,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
        consumers_per_channel: int = PER_CHANNEL,
    ) -> None:
        self.url = url
        self.name = name
        self._on_connected = on_connected
        self._parameters = connection_parameters(url)
        self._parameters.client_properties = {"connection_name": name}
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._lock = threading.Lock()
        self._connection: pika.SelectConnection | None = None
        self._channel: pika.channel.Channel | None = None
        self._ready = threading.Event()
        self._stopping = False
        self._generation = 0
        self._sequence = itertools.count(1)
        self._unconfirmed: dict[int, _Pending] = {}
        self._by_id: dict[str, _Pending] = {}
        self._queued: list[_Pending] = []
        self._flush_scheduled = False
        """A :meth:`_flush` is scheduled on the I/O thread and has not taken the queue
        yet: publishes meanwhile join it instead of waking the loop each."""
        self._settling: list[Callable[[], None]] = []
        """Acks and rejects waiting for the I/O thread, run by one scheduled callback."""
        self._settle_scheduled = False
        self._consumers = ConsumerChannels(self.heard, consumers_per_channel)
        """Every consumer, on channels they share (:mod:`~orkeon_actors.hub.amqp.consumers`)."""
        self.last_heard = time.monotonic()
        """When the broker last answered something of this link's (a consumer's channel
        opened, a consumer accepted, a batch of declarations: :meth:`heard`): the
        progress :meth:`consume` and the inbox declarations bound their waits by."""
        self._attempt = 0
        self._thread = threading.Thread(target=self._run, name=f"{name}-amqp-io", daemon=True)
        self._last_error: BaseException | None = None
        self._was_ready = False
        self._failure: BaseException | None = None
        """Why the link gave up (set once, before :meth:`start` returns)."""
        self.reconnects = 0
        """How many times the link reconnected after losing the broker."""
        self.attempts = 0
        """How many connections the link tried to open, failed ones included."""

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> BrokerLink:
        """Connect (and declare, through ``on_connected``); raise ``BrokerUnavailableError``
        if the broker is not reachable within ``timeout`` seconds (the link keeps trying
        in the background until :meth:`stop`)."""
        self._thread.start()
        ready = self._ready.wait(timeout)
        if self._failure is not None:
            self.stop()
            raise self._failure
        if not ready:
            last = "" if self._last_error is None else f" (last attempt: {_describe(self._last_error)})"
            raise BrokerUnavailableError(
                f"the broker at {_safe(self.url)} did not answer within {timeout} s{last}: check that RabbitMQ runs "
                "there and that the URI's host, port, vhost and login are right"
            )
        return self

    @property
    def connected(self) -> bool:
        return self._ready.is_set()

    def stop(self) -> None:
        """Close the connection and end the I/O thread; unconfirmed publishes fail with
        ``BrokerUnavailableError``. Idempotent."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            connection = self._connection
        if connection is not None and self._thread.is_alive():
            self._threadsafe(connection, self._close)
        self._thread.join(timeout=10)
        self._fail_all(BrokerUnavailableError("the broker link was stopped before the broker confirmed the message"))

    def _close(self) -> None:
        connection = self._connection
        if connection is not None and not (connection.is_closing or connection.is_closed):
            connection.close()
        elif connection is not None:
            connection.ioloop.stop()

    # -- the I/O thread -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
            connection = pika.SelectConnection(
                self._parameters,
                on_open_callback=self._opened,
                on_open_error_callback=self._open_failed,
                on_close_callback=self._closed,
            )
            with self._lock:
                self._connection = connection
            self.attempts += 1
            try:
                connection.ioloop.start()
            except (OSError, ValueError) as error:
                if connection.is_open:
                    raise  # raised by one of our callbacks on an open connection: a bug, not the network
                # pika's connection workflow lets a socket reset mid-handshake (for example
                # "getpeername() failed" on a peer that accepted, then closed) escape its I/O
                # loop instead of reporting it to on_open_error_callback: the same failure.
                self._connection_attempt_failed(connection, error)
            with self._lock:
                if self._stopping:
                    return
            delay = min(self._max_backoff, self._backoff * (2 ** min(self._attempt, 16)))
            self._attempt += 1
            threading.Event().wait(delay)

    def _connection_attempt_failed(self, connection: pika.SelectConnection, error: BaseException) -> None:
        self._last_error = error
        _log.warning("broker {} unreachable (connection attempt failed: {!r}); retrying", _safe(self.url), error)
        connection.ioloop.close()

    def _opened(self, connection: pika.SelectConnection) -> None:
        connection.channel(on_open_callback=self._channel_opened)

    def _open_failed(self, connection: pika.SelectConnection, error: BaseException) -> None:
        self._last_error = error
        if _definitive(error) and not self._was_ready:  # a first start: say it now, do not retry
            self._fail_start(BrokerAccessError(f"the broker at {_safe(self.url)} refused: {_describe(error)}"))
            connection.ioloop.stop()
            return
        tls = _tls_failure(error)
        if tls is not None and not self._was_ready:
            self._fail_start(
                BrokerTlsError(
                    f"the TLS handshake with the broker at {_safe(self.url)} failed: {tls}. Check the URI's cafile "
                    "(the CA that signed the broker's certificate), server_hostname (a name the certificate "
                    "carries) and, if the broker requires one, certfile and keyfile"
                )
            )
            connection.ioloop.stop()
            return
        _log.warning("broker {} unreachable ({}); retrying", _safe(self.url), _describe(error))
        connection.ioloop.stop()

    def _fail_start(self, failure: BrokerUnavailableError | ExclusiveConsumerError) -> None:
        """End a first start with ``failure`` (raised by :meth:`start`)."""
        self._failure = failure
        with self._lock:
            self._stopping = True
        self._ready.set()

    def _closed(self, connection: pika.SelectConnection, reason: BaseException) -> None:
        self._ready.clear()
        self._channel = None
        with self._lock:
            stopping = self._stopping
        if not stopping:
            _log.warning("lost the broker at {} ({}); reconnecting", _safe(self.url), reason)
            self.reconnects += 1
            self._requeue_unconfirmed()
        connection.ioloop.stop()

    def _channel_opened(self, channel: pika.channel.Channel) -> None:
        self._generation += 1
        self._sequence = itertools.count(1)
        channel.add_on_return_callback(self._returned)
        channel.add_on_close_callback(self._channel_closed)
        channel.confirm_delivery(self._confirmed, callback=lambda _frame: self._declare(channel))

    def _declare(self, channel: pika.channel.Channel) -> None:
        if self._on_connected is None:
            self._resume(channel)
        else:
            self._on_connected(channel, lambda: self._resume(channel))

    def _resume(self, channel: pika.channel.Channel) -> None:
        self._channel = channel
        self._attempt = 0
        connection = self._connection
        if connection is not None:
            self._consumers.reconnected(connection, self._generation)
        with self._lock:
            queued, self._queued = self._queued, []
            self._flush_scheduled = False  # one lost with the old connection's loop
            self._settling, self._settle_scheduled = [], False  # void: the broker redelivers them
        for pending in queued:
            self._publish_now(pending)
        self._was_ready = True
        self._ready.set()

    def _channel_closed(self, channel: pika.channel.Channel, reason: BaseException) -> None:
        connection = self._connection
        declaring = self._channel is None and not self._ready.is_set()
        if declaring and connection is not None and connection.is_open:
            locked = isinstance(reason, pika.exceptions.ChannelClosedByBroker) and reason.reply_code == _RESOURCE_LOCKED
            refused = isinstance(reason, pika.exceptions.ChannelClosedByBroker) and reason.reply_code == _ACCESS_REFUSED
            if locked and not self._was_ready:  # another connection holds this slice's exclusive queues
                self._fail_start(
                    ExclusiveConsumerError(
                        f"declaring the topology failed: {reason}. Another gateway for the same host holds its "
                        "exclusive queues; stop the other one, two would split the stream"
                    )
                )
            elif refused and not self._was_ready:  # the login's permissions lack a resource: definitive
                self._fail_start(
                    BrokerAccessError(
                        f"the broker at {_safe(self.url)} refused this login a resource of the fleet's topology "
                        f"({reason}): grant the login configure, write and read on the fleet's names "
                        "(docs/distributed.md, 'per-host logins')"
                    )
                )
            else:  # on a reconnect, the old connection's exclusive queues may linger a moment
                _log.warning("declaring the topology failed ({}); reconnecting", reason)
            connection.close()
            return
        if channel is self._channel and connection is not None and connection.is_open:
            _log.warning("the broker closed the publishing channel ({}); reconnecting", reason)
            connection.close()

    # -- publishing -----------------------------------------------------------------------

    def publish(self, outgoing: Outgoing) -> Future[None]:
        """Publish ``outgoing``; the future completes on the broker's confirm (see the
        module docstring for its failures). Thread-safe, never blocks."""
        pending = _Pending(outgoing, Future())
        with self._lock:
            if self._stopping:
                pending.future.set_exception(BrokerUnavailableError("the broker link is stopped"))
                return pending.future
            connection = self._connection
            self._queued.append(pending)
            flush = connection is not None and self._ready.is_set() and not self._flush_scheduled
            if flush:
                self._flush_scheduled = True
        if flush:
            assert connection is not None
            self._threadsafe(connection, self._flush)
        return pending.future

    def publish_and_wait(self, outgoing: Outgoing, timeout: float) -> None:
        """:meth:`publish`, then wait up to ``timeout`` seconds for the confirm; raise
        ``BrokerUnavailableError`` if none came (the message may still be published once
        the broker is back: it is not withdrawn)."""
        future = self.publish(outgoing)
        try:
            future.result(timeout)
        except TimeoutError:
            raise BrokerUnavailableError(
                f"the broker at {_safe(self.url)} did not confirm message {outgoing.message_id} within {timeout} s "
                "(unreachable or overloaded); it stays queued and is published on reconnect"
            ) from None

    def _flush(self) -> None:
        with self._lock:
            self._flush_scheduled = False
            if self._channel is None:
                return  # published by _resume once the link is back
            queued, self._queued = self._queued, []
        for pending in queued:
            self._publish_now(pending)

    def _publish_now(self, pending: _Pending) -> None:
        channel = self._channel
        if channel is None or not channel.is_open:
            with self._lock:
                self._queued.append(pending)
            return
        tag = next(self._sequence)
        self._unconfirmed[tag] = pending
        self._by_id[pending.outgoing.message_id] = pending
        out = pending.outgoing
        channel.basic_publish(out.exchange, out.routing_key, out.body, out.properties(), mandatory=out.mandatory)

    def _returned(
        self,
        channel: pika.channel.Channel,
        method: pika.spec.Basic.Return,
        properties: pika.spec.BasicProperties,
        body: bytes,
    ) -> None:
        pending = self._by_id.get(properties.message_id or "")
        if pending is not None:
            pending.returned = True  # the confirm that follows completes it as unroutable

    def heard(self) -> None:
        """Note that the broker answered (on the I/O thread): :attr:`last_heard`."""
        self.last_heard = time.monotonic()

    def _confirmed(self, frame: pika.frame.Method) -> None:
        method = frame.method
        last = method.delivery_tag
        tags = [tag for tag in self._unconfirmed if tag <= last] if method.multiple else [last]
        nack = isinstance(method, pika.spec.Basic.Nack)
        for tag in tags:
            pending = self._unconfirmed.pop(tag, None)
            if pending is None:
                continue
            out = pending.outgoing
            self._by_id.pop(out.message_id, None)
            if nack:
                pending.future.set_exception(
                    BrokerNackError(f"the broker refused message {out.message_id} (basic.nack): retry it later")
                )
            elif pending.returned:
                pending.future.set_exception(
                    UnroutableError(
                        f"no queue is bound to {out.exchange!r} with key {out.routing_key!r}: "
                        f"message {out.message_id} reached nobody"
                    )
                )
            else:
                pending.future.set_result(None)

    def _requeue_unconfirmed(self) -> None:
        """The connection dropped: what the broker had not confirmed goes first in line."""
        pending = [self._unconfirmed[tag] for tag in sorted(self._unconfirmed)]
        self._unconfirmed.clear()
        self._by_id.clear()
        for item in pending:
            item.returned = False
        with self._lock:
            self._queued = pending + self._queued

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            pending = list(self._unconfirmed.values()) + self._queued
            self._unconfirmed.clear()
            self._queued = []
        for item in pending:
            if not item.future.done():
                item.future.set_exception(error)

    # -- consuming ------------------------------------------------------------------------

    def consume(
        self,
        queue: str,
        on_message: Callable[[Delivery], None],
        *,
        prefetch: int,
        exclusive: bool = True,
        timeout: float = 10.0,
        wait: bool = True,
    ) -> None:
        """Consume ``queue`` with manual acks and at most ``prefetch`` unacknowledged
        deliveries, now and after every reconnect. Blocks until the broker accepted the
        consumer; raises ``ExclusiveConsumerError`` if another connection holds it.
        ``wait=False`` returns at once (while the broker is unreachable: the consumer
        starts with the next connection).

        ``timeout`` bounds the broker's *silence*, not the queue ahead of this consumer:
        ``BrokerUnavailableError`` only once the broker answered nothing of this link's
        (:attr:`last_heard`) for ``timeout`` seconds while this one waited. Many consumers opened at once (1,000
        crews starting together: 3,000 channel round trips on a loaded broker) all
        start, however long the burst takes, while a stalled broker still fails fast."""
        if prefetch < 1:
            raise ValueError(f"prefetch must be >= 1 (a bound on unacknowledged deliveries), got {prefetch}")
        consumer = Consumer(queue, on_message, prefetch, exclusive, Future())
        self._consumers.add(consumer)
        with self._lock:
            connection = self._connection
        if connection is not None and self._ready.is_set():
            self._threadsafe(connection, lambda: self._consumers.open(connection, consumer, self._generation))
        if not wait:
            return
        try:
            self._await_consumer(consumer, timeout)
        except BaseException:
            self._consumers.remove(consumer)
            raise

    def _await_consumer(self, consumer: Consumer, timeout: float) -> None:
        asked_at = time.monotonic()
        while True:
            since = max(self.last_heard, asked_at)
            try:
                consumer.registered.result(max(0.0, since + timeout - time.monotonic()))
                return
            except FutureTimeout:
                if self.last_heard <= since:
                    raise BrokerUnavailableError(
                        f"the broker answered nothing for {timeout} s while consuming {consumer.queue!r} was asked: "
                        "it is unreachable or stalled"
                    ) from None

    def drain(self, queue: str, deliver: Callable[[Delivery], None]) -> Future[int]:
        """Hand everything ``queue`` holds now to ``deliver``, in queue order, then go on
        consuming it (a fence for a queue just unbound: once the future completes, every
        message the queue took before the call reached its consumer's callback or
        ``deliver``). On the I/O thread: the consumer is cancelled (its deliveries
        arriving before the broker's ``cancel-ok`` reach its callback; pika returns any
        later one to the queue), the queue is emptied with ``basic.get`` (each message to
        ``deliver``, to be settled with :meth:`ack` / :meth:`reject` like a delivery),
        and the consumer starts again on the same channel. The future gives how many
        messages ``deliver`` got; it fails with ``BrokerUnavailableError`` if ``queue``
        has no running consumer on this connection."""
        done: Future[int] = Future()
        self.run_on_io_thread(lambda: self._consumers.drain(queue, deliver, done))
        return done

    def ack(self, delivery: Delivery) -> None:
        """Acknowledge ``delivery`` (thread-safe). A delivery of an earlier connection is
        skipped: the broker redelivers it."""
        self._settle(delivery, lambda channel: channel.basic_ack(delivery.delivery_tag))

    def reject(self, delivery: Delivery) -> None:
        """Reject ``delivery`` without requeue: it goes to its queue's dead-letter exchange."""
        self._settle(delivery, lambda channel: channel.basic_reject(delivery.delivery_tag, requeue=False))

    def _settle(self, delivery: Delivery, action: Callable[[pika.channel.Channel], None]) -> None:
        connection = self._connection
        if connection is None:
            return

        def run() -> None:
            if delivery.generation != self._generation:
                return
            channel = delivery.channel
            if channel is None:  # a delivery made by hand: its queue's consumer's channel
                consumer = self._consumers.of_queue(delivery.queue)
                channel = None if consumer is None else consumer.channel
            if channel is not None and channel.is_open:  # closed: the broker requeued it
                action(channel)

        with self._lock:
            self._settling.append(run)
            schedule = not self._settle_scheduled
            self._settle_scheduled = True
        if schedule:  # one wake of the I/O loop for the acks of a whole batch
            self._threadsafe(connection, self._run_settlements)

    def _run_settlements(self) -> None:
        with self._lock:
            runs, self._settling = self._settling, []
            self._settle_scheduled = False
        for run in runs:
            run()

    # -- plumbing -------------------------------------------------------------------------

    def _threadsafe(self, connection: pika.SelectConnection, fn: Callable[[], None]) -> None:
        if threading.current_thread() is self._thread:
            fn()
            return
        try:
            connection.ioloop.add_callback_threadsafe(fn)
        except pika.exceptions.ConnectionWrongStateError:
            pass  # the loop is closing: the reconnect replays queued work

    def run_on_io_thread(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the I/O thread (e.g. to declare more topology on ``channel``)."""
        connection = self._connection
        if connection is None:
            raise BrokerUnavailableError("the broker link is not connected yet: call start() first")
        self._threadsafe(connection, fn)

    @property
    def consumer_channels(self) -> int:
        """How many channels this connection's consumers share now (open or opening)."""
        return self._consumers.channels()

    @property
    def channel(self) -> pika.channel.Channel | None:
        """The publishing channel (use only on the I/O thread)."""
        return self._channel


def _definitive(error: BaseException) -> bool:
    """Whether a failed connection attempt is a refusal that retrying does not change
    (a wrong login, a vhost that does not exist or that the login may not open)."""
    return isinstance(
        error,
        pika.exceptions.ProbableAuthenticationError
        | pika.exceptions.AuthenticationError
        | pika.exceptions.ProbableAccessDeniedError,
    )


def _tls_failure(error: BaseException) -> str | None:
    """What failed in a TLS handshake that retrying does not change (a certificate
    refused either way), or ``None`` (not TLS, or a connection cut mid-handshake)."""
    root = _innermost(error)
    transient = ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLSyscallError | ssl.SSLWantReadError
    if not isinstance(root, ssl.SSLError) or isinstance(root, transient | ssl.SSLWantWriteError):
        return None
    return f"{type(root).__name__}: {root}"


def _innermost(error: BaseException) -> BaseException:
    """The exception at the bottom of pika's wrappers (a connection workflow's last
    attempt, a connector's socket error): the one that says what happened."""
    seen: set[int] = set()
    while id(error) not in seen:
        seen.add(id(error))
        attempts = getattr(error, "exceptions", None)
        wrapped = getattr(error, "exception", None)
        if isinstance(attempts, list | tuple) and attempts and isinstance(attempts[-1], BaseException):
            error = attempts[-1]
        elif isinstance(wrapped, BaseException):
            error = wrapped
        elif error.args and isinstance(error.args[0], BaseException):
            error = error.args[0]
    return error


def _describe(error: BaseException) -> str:
    if isinstance(error, pika.exceptions.ProbableAuthenticationError | pika.exceptions.AuthenticationError):
        return f"the broker refused the login ({_text_of(error)}): check the URI's user and password"
    if isinstance(error, pika.exceptions.ProbableAccessDeniedError):
        text = _text_of(error)
        if "not found" in text:
            return f"the URI's vhost does not exist on the broker ({text}): create it (rabbitmqctl add_vhost) or fix it"
        return f"the login may not open this vhost ({text}): rabbitmqctl set_permissions -p VHOST USER ..."
    root = _innermost(error)
    return f"{type(root).__name__}: {root}" if str(root) else type(root).__name__


def _text_of(error: BaseException) -> str:
    """The broker's own words in a pika refusal (``(530) 'NOT_ALLOWED - vhost x not found'``)."""
    return " ".join(str(arg) for arg in error.args) if error.args else str(error)


def _safe(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    return redacted(url)
