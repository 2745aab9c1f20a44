"""The consumers of one broker connection, sharing channels
(:class:`~orkeon_actors.hub.amqp.link.BrokerLink`): a host with thousands of mailboxes is
not capped by the broker's ``channel_max``.

Each consumer used to have a channel of its own, so one connection held at most
``channel_max`` consumers (2,047 on RabbitMQ by default, less the publishing channel):
a host could not keep the inboxes of 5,000 crews. :class:`ConsumerChannels` places up to
``per_channel`` consumers of the same prefetch on one channel (:data:`PER_CHANNEL`, 128
by default: 2,047 channels then hold over 260,000 consumers). The guarantees of one
channel each stay:

* **Per-consumer prefetch.** A channel's ``basic.qos`` (not global) bounds each consumer
  created on it, so every consumer keeps its own window of unacknowledged deliveries.
* **Settled where delivered.** A :class:`Delivery` carries the channel it came on; acks
  and rejects go to that channel, and to none once it closed (the broker requeued what it
  held: it is redelivered, ``redelivered`` set).
* **A refusal fails one consumer, not its neighbours.** When the broker closes a channel
  over a ``basic.consume`` (an exclusive queue another connection holds: 405; access:
  403; anything else), the consumer it refused fails (its ``registered`` future raises
  ``ExclusiveConsumerError`` or ``BrokerError``) and every other consumer of that channel
  is placed again on another one. pika sends one synchronous method at a time per
  channel, so the refused consumer is the oldest one not yet acknowledged (or the one
  the broker's reply names).
* **Drains one at a time.** :meth:`ConsumerChannels.drain` (cancel, ``basic.get`` to
  empty, consume again) runs for one queue at a time: pika allows one ``basic.get`` in
  flight per channel, and neighbours share a channel.

Everything here runs on the link's I/O thread except :meth:`add` and :meth:`remove`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Final

import attrs
import pika
import pika.channel
import pika.exceptions
import pika.frame
import pika.spec
from loguru import logger

from orkeon_actors.errors import BrokerError, BrokerUnavailableError, ExclusiveConsumerError

__all__ = ["PER_CHANNEL", "Consumer", "ConsumerChannels", "Delivery", "delivery_of"]

_log = logger.bind(component="orkeon_actors.amqp")

PER_CHANNEL: Final = 128
"""Consumers at most per channel: bounded, so that a channel closed over one refusal
moves few neighbours, and one channel's deliveries stay one broker process's work."""
_ACCESS_REFUSED = 403
_RESOURCE_LOCKED = 405
_Finished = Callable[[int | None, BaseException | None], None]
"""How a drain reports: the messages it handed over, or why it failed."""


@attrs.frozen
class Delivery:
    """One message a consumer received. ``generation`` identifies the connection it came
    on and ``channel`` the channel: :meth:`BrokerLink.ack` of a delivery from an earlier
    connection, or from a channel closed since, does nothing."""

    queue: str
    routing_key: str
    exchange: str
    body: bytes
    message_id: str | None
    headers: dict[str, Any]
    delivery_tag: int
    redelivered: bool
    generation: int
    channel: pika.channel.Channel | None = attrs.field(default=None, eq=False, repr=False)


@attrs.define(eq=False)
class Consumer:
    """A consumer the link keeps (re-established after every reconnect)."""

    queue: str
    on_message: Callable[[Delivery], None]
    prefetch: int
    exclusive: bool
    registered: Future[None]
    channel: pika.channel.Channel | None = None
    tag: str | None = None
    """The broker's consumer tag on ``channel`` (once ``basic.consume`` was sent)."""


@attrs.define(eq=False)
class _Slot:
    """One shared channel (``None`` while it opens) and the consumers placed on it."""

    prefetch: int
    generation: int
    channel: pika.channel.Channel | None = None
    members: list[Consumer] = attrs.field(factory=list)
    waiting: list[Consumer] = attrs.field(factory=list)
    """Placed while the channel opens: consumed once it is open."""
    pending: list[Consumer] = attrs.field(factory=list)
    """``basic.consume`` sent, not acknowledged yet (in the order sent)."""


class ConsumerChannels:
    """The consumers of a link and the channels they share (see the module docstring).
    ``heard`` is told of every answer of the broker (the link's progress clock)."""

    def __init__(self, heard: Callable[[], None], per_channel: int = PER_CHANNEL) -> None:
        if per_channel < 1:
            raise ValueError(f"per_channel must be >= 1, got {per_channel}")
        self._heard = heard
        self._per_channel = per_channel
        self._lock = threading.Lock()
        self._consumers: list[Consumer] = []
        self._slots: list[_Slot] = []
        self._drains: deque[Callable[[], None]] = deque()
        self._draining = False
        self._current_drain: tuple[_Slot, _Finished] | None = None

    # -- any thread -----------------------------------------------------------------------

    def add(self, consumer: Consumer) -> None:
        with self._lock:
            self._consumers.append(consumer)

    def remove(self, consumer: Consumer) -> None:
        with self._lock:
            if consumer in self._consumers:
                self._consumers.remove(consumer)

    def _holds(self, consumer: Consumer) -> bool:
        with self._lock:
            return consumer in self._consumers

    def of_queue(self, queue: str) -> Consumer | None:
        with self._lock:
            return next((c for c in self._consumers if c.queue == queue), None)

    def channels(self) -> int:
        """How many consumer channels are open or opening now (a figure for tests)."""
        return len(self._slots)

    # -- the I/O thread -------------------------------------------------------------------

    def reconnected(self, connection: pika.SelectConnection, generation: int) -> None:
        """A new connection: the old channels are gone; open every consumer again."""
        self._slots = []
        with self._lock:
            consumers = list(self._consumers)
        for consumer in consumers:
            self.open(connection, consumer, generation)
        current = self._current_drain
        if current is not None:  # the drains queued behind it run next, on the new channels
            current[1](None, BrokerUnavailableError("the connection was lost while draining"))

    def open(self, connection: pika.SelectConnection, consumer: Consumer, generation: int) -> None:
        """Place ``consumer`` on a channel with room (a new one if none) and consume."""
        if not connection.is_open or any(consumer in s.members for s in self._slots if s.generation == generation):
            return  # gone, or placed already (asked to open while the reconnect opened it)
        slot = next(
            (
                s
                for s in self._slots
                if s.prefetch == consumer.prefetch and s.generation == generation and len(s.members) < self._per_channel
            ),
            None,
        )
        if slot is None:
            slot = _Slot(consumer.prefetch, generation)
            try:
                connection.channel(on_open_callback=lambda channel: self._opened(connection, slot, channel))
            except pika.exceptions.NoFreeChannels:
                self._refused(
                    consumer,
                    BrokerError(
                        f"consuming {consumer.queue!r} needs a channel and the connection has none left (channel_max "
                        f"reached with {self._per_channel} consumers per channel): raise channel_max on the broker"
                    ),
                )
                return
            self._slots.append(slot)
        slot.members.append(consumer)
        if slot.channel is None:
            slot.waiting.append(consumer)
        else:
            self._consume(slot, consumer, lambda: self._registered(consumer))

    def _opened(self, connection: pika.SelectConnection, slot: _Slot, channel: pika.channel.Channel) -> None:
        self._heard()
        slot.channel = channel
        channel.add_on_close_callback(lambda _channel, reason: self._closed(connection, slot, reason))
        channel.basic_qos(prefetch_count=slot.prefetch, callback=lambda _frame: self._heard())
        waiting, slot.waiting = slot.waiting, []
        for consumer in waiting:  # pika sends them after the qos: each gets its prefetch
            self._consume(slot, consumer, lambda consumer=consumer: self._registered(consumer))  # type: ignore[misc]

    def _consume(self, slot: _Slot, consumer: Consumer, on_ok: Callable[[], None]) -> None:
        channel = slot.channel
        assert channel is not None
        consumer.channel = channel
        generation = slot.generation

        def on_message(
            _channel: pika.channel.Channel,
            method: pika.spec.Basic.Deliver,
            properties: pika.spec.BasicProperties,
            body: bytes,
        ) -> None:
            consumer.on_message(delivery_of(consumer.queue, method, properties, body, generation, channel))

        def consuming(_frame: pika.frame.Method) -> None:
            if consumer in slot.pending:
                slot.pending.remove(consumer)
            self._heard()
            on_ok()

        slot.pending.append(consumer)
        consumer.tag = channel.basic_consume(
            consumer.queue, on_message, exclusive=consumer.exclusive, callback=consuming
        )

    @staticmethod
    def _registered(consumer: Consumer) -> None:
        if not consumer.registered.done():
            consumer.registered.set_result(None)

    def _closed(self, connection: pika.SelectConnection, slot: _Slot, reason: BaseException) -> None:
        if slot in self._slots:
            self._slots.remove(slot)
        if not connection.is_open:
            return  # the connection went: the reconnect opens every consumer again
        current = self._current_drain
        if current is not None and current[0] is slot:
            current[1](None, BrokerUnavailableError(f"the channel closed while draining: {reason}"))
        refused = self._blamed(slot, reason)
        for consumer in slot.members:
            if consumer is refused:
                code = reason.reply_code if isinstance(reason, pika.exceptions.ChannelClosedByBroker) else None
                if code in (_ACCESS_REFUSED, _RESOURCE_LOCKED):
                    error: BrokerError = ExclusiveConsumerError(
                        f"queue {consumer.queue!r} is consumed exclusively by another connection (another gateway "
                        f"for the same host?): {reason}. Stop the other one; two would split the stream"
                    )
                else:
                    error = BrokerError(f"the broker refused consuming {consumer.queue!r}: {reason}")
                self._refused(consumer, error)
            elif self._holds(consumer):
                self.open(connection, consumer, slot.generation)

    @staticmethod
    def _blamed(slot: _Slot, reason: BaseException) -> Consumer | None:
        """The consumer the broker refused: the one its reply names, else the oldest
        ``basic.consume`` not acknowledged (pika sends one at a time per channel)."""
        if not slot.pending:
            return None
        text = str(reason)
        named = [c for c in slot.pending if f"'{c.queue}'" in text]
        return named[0] if named else slot.pending[0]

    def _refused(self, consumer: Consumer, error: BrokerError) -> None:
        if consumer.registered.done():  # refused again after a reconnect: tried again on the next
            _log.error("{}; it is consumed again after the next reconnect", error)
            return
        self.remove(consumer)
        consumer.registered.set_exception(error)

    # -- drains ---------------------------------------------------------------------------

    def drain(self, queue: str, deliver: Callable[[Delivery], None], done: Future[int]) -> None:
        """Queue a drain of ``queue`` (see :meth:`BrokerLink.drain`); ``done`` gets how
        many messages ``deliver`` got."""

        def finished(result: int | None, error: BaseException | None) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(int(result or 0))
            else:
                done.set_exception(error)
            self._current_drain = None
            self._draining = False
            self._next_drain()

        self._drains.append(lambda: self._drain_now(queue, deliver, finished))
        self._next_drain()

    def _next_drain(self) -> None:
        if self._draining or not self._drains:
            return
        self._draining = True
        self._drains.popleft()()

    def _drain_now(
        self,
        queue: str,
        deliver: Callable[[Delivery], None],
        finished: _Finished,
    ) -> None:
        consumer = self.of_queue(queue)
        channel = None if consumer is None else consumer.channel
        slot = next((s for s in self._slots if consumer in s.members and s.channel is channel), None)
        if consumer is None or channel is None or not channel.is_open or consumer.tag is None or slot is None:
            finished(None, BrokerUnavailableError(f"no consumer of {queue!r} is running on this connection"))
            return
        self._current_drain = (slot, finished)
        got = 0

        def one(
            _channel: pika.channel.Channel,
            method: pika.spec.Basic.GetOk,
            properties: pika.spec.BasicProperties,
            body: bytes,
        ) -> None:
            nonlocal got
            got += 1
            deliver(delivery_of(queue, method, properties, body, slot.generation, channel))
            channel.basic_get(queue, one)

        def empty(_frame: pika.frame.Method) -> None:
            self._consume(slot, consumer, lambda: finished(got, None))

        def cancelled(_frame: pika.frame.Method) -> None:
            self._heard()
            channel.add_callback(empty, [pika.spec.Basic.GetEmpty], one_shot=True)
            channel.basic_get(queue, one)

        channel.basic_cancel(consumer.tag, callback=cancelled)


def delivery_of(
    queue: str,
    method: pika.spec.Basic.Deliver | pika.spec.Basic.GetOk,
    properties: pika.spec.BasicProperties,
    body: bytes,
    generation: int = 0,
    channel: pika.channel.Channel | None = None,
) -> Delivery:
    """The :class:`Delivery` of a message pika handed over (consumed, or read with
    ``basic_get`` by a tool outside any consumer: no generation, no channel)."""
    return Delivery(
        queue,
        method.routing_key,
        method.exchange,
        body,
        properties.message_id,
        dict(properties.headers or {}),
        method.delivery_tag,
        bool(method.redelivered),
        generation,
        channel,
    )
