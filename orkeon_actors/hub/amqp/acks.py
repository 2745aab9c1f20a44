"""Acknowledging a consumer's deliveries in as few frames as consume-and-hold allows
(:class:`~orkeon_actors.hub.amqp.link.BrokerLink`'s settlements, on its I/O thread).

A ``basic.ack(multiple=True)`` of tag T acknowledges every unacknowledged delivery of
the channel up to T. Sent blindly it would acknowledge a delivery still held (its store
has not committed it yet): a crash would then lose it. :class:`UnsettledTags` keeps the
channel's delivery tags in order and sends one ``multiple`` ack only over the oldest run
of tags that are all settled, the others one by one.
"""

from __future__ import annotations

from collections import deque

import pika.channel

__all__ = ["UnsettledTags"]


class UnsettledTags:
    """The delivery tags of one consumer's channel not settled yet, in delivery order.
    Used on the broker link's I/O thread only."""

    def __init__(self) -> None:
        self._unsettled: deque[int] = deque()
        self._alone: set[int] = set()
        """Tags of ``_unsettled`` settled one by one (out of order), popped lazily."""

    def delivered(self, tag: int) -> None:
        self._unsettled.append(tag)

    def settle(self, channel: pika.channel.Channel, acks: list[int], rejects: list[int]) -> None:
        """Acknowledge ``acks`` and reject ``rejects`` (without requeue) on ``channel``:
        the longest run of unsettled tags from the oldest that are all settled now is
        acknowledged by one ``basic.ack(multiple=True)`` of its last acknowledged tag (it
        covers nothing still held: every older tag is settled); the rest one by one."""
        if not channel.is_open:
            return
        for tag in rejects:
            channel.basic_reject(tag, requeue=False)
        alone, unsettled = self._alone, self._unsettled
        alone.update(rejects)
        pending = set(acks)
        last = 0
        while unsettled and (unsettled[0] in pending or unsettled[0] in alone):
            tag = unsettled.popleft()
            if tag in pending:
                pending.discard(tag)
                last = tag
            else:
                alone.discard(tag)
        if last:
            channel.basic_ack(last, multiple=True)
        for tag in acks:
            if tag in pending:  # an older delivery is still held: this one alone
                channel.basic_ack(tag)
                alone.add(tag)
