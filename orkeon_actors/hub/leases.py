"""Mailbox leases: a message taken provisionally, then confirmed or given back
(:class:`~orkeon_actors.hub.port.MailboxLease`, ``docs/hub.md`` "Leases").

A consumer that may fail to deliver what it read (an MCP call whose caller goes away
before its answer is written) must not lose the message: it takes it with
``hub.lease(...)``, and the message counts as consumed only when the consumer
confirms it (:meth:`HubLease.confirm`). The parts:

* the wait is an ordinary mailbox wait (:meth:`HubWaits.lease
  <orkeon_actors.hub.waits.HubWaits.lease>`) whose waiter is a
  :class:`~orkeon_actors.hub.mailbox.LeaseWaiter`: the mailbox actor that hands it a
  message holds the mailbox in the same turn (everything else waits), so a
  cancellation either wins (the message stays) or loses (the lease is returned);
* the receive stages run when the message is taken, as for ``wait_for``; a give-back
  tells them (:meth:`~orkeon_actors.hub.pipeline.Pipeline.given_back`), so an
  idempotency stage lets the message through again;
* the durable store hears of the message only at :meth:`HubLease.confirm`, which
  acknowledges it at once (a crew that defers its acknowledgements logs it for its
  snapshot instead): until then its row is kept as if nobody had read it, so a crash
  while a lease is held redelivers it first.

Nothing here is on the post/send/receive hot path: only lease messages reach the
mailbox actor's lease code, and an ordinary wait pays one type test at registration.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from loguru import logger

from orkeon_actors.errors import DuplicateMessageError, LeaseRevokedError, MailboxNotFoundError
from orkeon_actors.hub.port import MailboxLease
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.hub.mailbox import LeaseWaiter
    from orkeon_actors.hub.memory import HubCore

__all__ = ["HubLease", "TimedOutLease", "received"]


def received(hub: HubCore, message: Message) -> Message | None:
    """``message`` through the hub's receive stages of a wait (``None``: a stage dropped
    it as a duplicate), without telling the mailbox store: a lease tells it at confirm."""
    receive = hub.receive_wait
    if receive is None:
        return message
    try:
        return receive(message)
    except DuplicateMessageError:
        logger.debug("dropped duplicate message {} at a lease", message.id)
        return None


class HubLease(MailboxLease):
    """A lease of the hub core on one mailbox message (see the module docstring).
    Thread-safe: the first of :meth:`confirm` / :meth:`give_back` wins."""

    def __init__(self, hub: HubCore, waiter: LeaseWaiter, taken: Message) -> None:
        self._hub = hub
        self._waiter = waiter
        self._taken = taken  # as the mailbox held it (what goes back), before the receive stages
        self.message = taken
        self._lock = threading.Lock()
        self._held = True

    @property
    def held(self) -> bool:
        return self._held

    def _end(self) -> bool:
        with self._lock:
            held, self._held = self._held, False
        return held

    def confirm(self) -> None:
        if not self._end():
            return
        taken = self._taken
        hub = self._hub
        address = self._waiter.handle.address
        try:
            self._waiter.handle.end_lease(self._waiter, None)
        except MailboxNotFoundError:
            raise LeaseRevokedError(address, taken.id) from None
        # The store hears of it only now: consumed (or logged for a deferring crew's
        # snapshot), then acknowledged at once: the consumer is done with it.
        hub.consume(None, taken)
        hub.receiving(address)

    def confirm_quietly(self) -> None:
        """:meth:`confirm`, for a message the lease itself consumes (a receive stage
        dropped or refused it); a mailbox closed meanwhile returned it already."""
        try:
            self.confirm()
        except MailboxNotFoundError:
            logger.debug("lease of {} ended by its mailbox's close", self._taken.id)

    def give_back(self) -> None:
        if not self._end():
            return
        taken = self._taken
        self._hub.pipeline.given_back(taken)  # before any reader can take it again
        try:
            self._waiter.handle.end_lease(self._waiter, taken)
        except MailboxNotFoundError:
            logger.debug("lease of {} given back after its mailbox closed: the close returned it", taken.id)

    def __repr__(self) -> str:
        state = "held" if self._held else "ended"
        return f"MailboxLease({self._waiter.handle.address!s}, {self._taken.id!s}, {state})"


class TimedOutLease(MailboxLease):
    """The lease of a wait that timed out: it holds nothing (``message.is_timeout``)."""

    def __init__(self, message: Message) -> None:
        self.message = message

    @property
    def held(self) -> bool:
        return False

    def confirm(self) -> None:
        return None

    def give_back(self) -> None:
        return None

    def __repr__(self) -> str:
        return "MailboxLease(timed out)"
