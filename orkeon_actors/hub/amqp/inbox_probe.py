"""Inbox declarations on a channel of their own, where an inbox that exists with other
arguments is found without harming the working channel (cross-host messaging design,
§8 step 3 and §10.1: every inbox is capped).

A host declares each of its inboxes with its cap arguments
(:func:`~orkeon_actors.hub.amqp.topology.inbox_arguments`). RabbitMQ refuses to
redeclare an existing queue with other arguments (an inbox made by an older host, or with
other caps): it answers ``PRECONDITION_FAILED`` (406) and closes the channel. Were that
the publishing channel, the whole link would reconnect, and fail the same way again.
:class:`InboxProbe` sends the declarations on a second channel instead:

* the declarations of a batch go out back to back (``nowait``) and only the last is
  awaited: no cost over declaring on the working channel when every inbox matches;
* on a 406 it tells ``on_mismatch(queue, broker's text)`` which inbox (the broker's
  text names it and says what it found, e.g. ``inequivalent arg 'x-max-length' ...
  received the value '100000' ... but current is none``), opens a new channel and goes
  on with the next inbox; the inbox is used as it is (it exists: bindings and consumers
  work whatever its arguments). When the text names no inbox of the batch, the rest of
  the batch is declared one by one, which pins the mismatch on its inbox;
* any other refusal (``ACCESS_REFUSED``, ...) is not the probe's to judge: the rest of
  the batch is declared on the working channel, where the link's own handling reports
  it (:class:`~orkeon_actors.errors.BrokerAccessError` at start, else a reconnect);
* a connection lost meanwhile drops the batch: the link's reconnect declares everything
  again.

Runs on the link's I/O thread only (pika's callbacks), one batch at a time in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs
import pika.channel
import pika.exceptions

__all__ = ["InboxProbe"]

_PRECONDITION_FAILED: Final = 406


@attrs.define
class _Batch:
    items: list[tuple[str, dict[str, Any]]]
    working: pika.channel.Channel
    done: Callable[[], None]
    index: int = 0
    """Items before it are declared (or found with other arguments)."""
    one_by_one: bool = False


class InboxProbe:
    """Declares inboxes for :meth:`~orkeon_actors.hub.amqp.topology.Declarer.run` (see
    the module docstring). ``on_mismatch(queue, text)`` is called on the I/O thread for
    each inbox found with other arguments (at every declaration of it: the caller
    decides how often to say so)."""

    def __init__(self, on_mismatch: Callable[[str, str], None]) -> None:
        self._on_mismatch = on_mismatch
        self._channel: pika.channel.Channel | None = None
        self._batches: list[_Batch] = []
        """The batch in progress first, then the ones waiting for it."""

    def __call__(
        self, items: list[tuple[str, dict[str, Any]]], working: pika.channel.Channel, done: Callable[[], None]
    ) -> None:
        if not items:
            done()
            return
        self._batches.append(_Batch(list(items), working, done))
        if len(self._batches) == 1:
            self._go()

    # -- the batch in progress ----------------------------------------------------------

    def _go(self) -> None:
        if not self._batches:
            return
        batch = self._batches[0]
        connection = batch.working.connection
        if connection.is_closing or connection.is_closed:
            self._batches.clear()  # the reconnect declares everything again
            return
        channel = self._channel
        if channel is None or not channel.is_open or channel.connection is not connection:
            self._channel = None
            try:
                connection.channel(on_open_callback=self._opened)
            except pika.exceptions.ConnectionWrongStateError:
                self._batches.clear()
            return
        if batch.index >= len(batch.items):
            self._finish(batch)
        elif batch.one_by_one:
            queue, arguments = batch.items[batch.index]
            channel.queue_declare(queue, durable=True, arguments=arguments, callback=lambda _f: self._one_done(batch))
        else:
            rest = batch.items[batch.index :]
            for queue, arguments in rest[:-1]:
                channel.queue_declare(queue, durable=True, arguments=arguments)  # nowait
            queue, arguments = rest[-1]
            channel.queue_declare(queue, durable=True, arguments=arguments, callback=lambda _f: self._finish(batch))

    def _opened(self, channel: pika.channel.Channel) -> None:
        channel.add_on_close_callback(self._closed)
        self._channel = channel
        self._go()

    def _one_done(self, batch: _Batch) -> None:
        batch.index += 1
        self._go()

    def _finish(self, batch: _Batch) -> None:
        if self._batches and self._batches[0] is batch:
            self._batches.pop(0)
        batch.done()
        self._go()

    def _closed(self, channel: pika.channel.Channel, reason: BaseException) -> None:
        if channel is not self._channel:
            return
        self._channel = None
        if not self._batches:
            return
        batch = self._batches[0]
        if not isinstance(reason, pika.exceptions.ChannelClosedByBroker) or reason.reply_code != _PRECONDITION_FAILED:
            if isinstance(reason, pika.exceptions.ChannelClosedByBroker):
                self._batches.pop(0)
                self._on_working_channel(batch)
                self._go()
            else:  # the connection is going: the reconnect declares everything again
                self._batches.clear()
            return
        text = reason.reply_text
        named = [i for i in range(batch.index, len(batch.items)) if f"queue '{batch.items[i][0]}'" in text]
        if named:
            self._on_mismatch(batch.items[named[0]][0], text)
            batch.index = named[0] + 1
        elif batch.one_by_one:
            self._on_mismatch(batch.items[batch.index][0], text)
            batch.index += 1
        else:
            batch.one_by_one = True  # which one is unknown: pin it down one by one
        self._go()

    @staticmethod
    def _on_working_channel(batch: _Batch) -> None:
        """Declare what is left on the working channel: its failure is the link's to report."""
        rest = batch.items[batch.index :]
        if not rest:
            batch.done()
            return
        for queue, arguments in rest[:-1]:
            batch.working.queue_declare(queue, durable=True, arguments=arguments)
        queue, arguments = rest[-1]
        batch.working.queue_declare(queue, durable=True, arguments=arguments, callback=lambda _f: batch.done())
