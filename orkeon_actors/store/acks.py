"""Consume acknowledgement: when a consumed mailbox row may be deleted.

A durable mailbox keeps a message's row until the message is *acknowledged*, so a crash
while a consumer handles it means redelivery, never loss (at-least-once). The row of the
message last handed to a consumer of a mailbox is deleted when:

* the consumer comes back to that mailbox (``receive`` again, another
  ``wait_for(WaitOnMailbox)``), whatever that attempt brings (a message, a timeout, a
  cancellation): it is done with the previous one;
* the runtime stops cleanly;
* its held reader closes, or the registration closes;
* a unit of work consuming it commits (in the same transaction as its effects and its
  ``processed_messages`` row: exactly-once processing);
* ``hub.acknowledge(message)`` is called.

A consumer whose *state* is durable elsewhere (a lifecycle-managed crew, restored from
its snapshot after a crash) needs more: a message it consumed must stay kept until that
state records it, else a crash restores the old state without the message. For such a
consumer the hub *defers* acknowledgement (``hub.defer_acks(crew_id)``): every message
its mailboxes hand out is appended to a :class:`ConsumedLedger` instead, and the rows are
deleted only by the transaction that writes the crew's next snapshot (or its completion
or failure record), together with their ``processed_messages`` rows.

This module only tracks, per mailbox, which message is handed out and not yet
acknowledged, and the ledgers of deferring consumers. Thread-safe.
"""

from __future__ import annotations

import threading

from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import MessageId

__all__ = ["AckTracker", "ConsumedLedger"]


class AckTracker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handed: dict[MailboxAddress, MessageId] = {}

    def handed(self, address: MailboxAddress, message_id: MessageId) -> MessageId | None:
        """``message_id`` was just handed to a consumer of ``address``; returns the
        previously handed message, which is now acknowledged (``None`` if none)."""
        with self._lock:
            previous = self._handed.get(address)
            self._handed[address] = message_id
        return previous if previous != message_id else None

    def release(self, address: MailboxAddress) -> MessageId | None:
        """The consumer of ``address`` left: returns its unacknowledged message, if any."""
        with self._lock:
            return self._handed.pop(address, None)

    def forget(self, address: MailboxAddress, message_id: MessageId) -> None:
        """``message_id`` was acknowledged some other way (a unit of work, explicitly)."""
        with self._lock:
            if self._handed.get(address) == message_id:
                del self._handed[address]

    def outstanding(self) -> dict[MailboxAddress, MessageId]:
        with self._lock:
            return dict(self._handed)


class ConsumedLedger:
    """The mailbox messages a deferring consumer (one crew) was handed and whose rows
    are not yet deleted, in consumption order, as ``(address, message_id)``.

    The hub appends (:meth:`add`) when one of the crew's mailboxes hands a message out;
    the owner takes a :meth:`view` when it captures the state that reflects them, writes
    the deletion of exactly those rows in the transaction holding that state, and only
    after its commit calls :meth:`acknowledged`. A failed write leaves them in the
    ledger (and their rows in the store): the next write acknowledges them.
    Thread-safe."""

    __slots__ = ("_lock", "_rows")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: list[tuple[str, str]] | tuple[()] = ()  # a list once it holds a row (a parked crew's holds none)

    def add(self, address: MailboxAddress, message_id: MessageId) -> None:
        with self._lock:
            rows = self._rows
            if isinstance(rows, list):
                rows.append((str(address), str(message_id)))
            else:
                self._rows = [(str(address), str(message_id))]

    def view(self) -> tuple[tuple[str, str], ...]:
        """The rows consumed so far and not yet acknowledged, oldest first."""
        with self._lock:
            return tuple(self._rows)

    def acknowledged(self, rows: tuple[tuple[str, str], ...]) -> None:
        """``rows`` (a :meth:`view`) were deleted by a committed transaction."""
        done = set(rows)
        with self._lock:
            self._rows = [row for row in self._rows if row not in done] or ()

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)
