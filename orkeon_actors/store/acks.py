"""Consume acknowledgement: when a consumed mailbox row may be deleted.

A durable mailbox keeps a message's row until the message is *acknowledged*, so a crash
while a consumer handles it means redelivery, never loss (at-least-once). The row of the
message last handed to a consumer of a mailbox is deleted when:

* the consumer comes back for the next message of that mailbox (``receive`` again,
  another ``wait_for(WaitOnMailbox)``): it is done with the previous one;
* its held reader closes, or the registration closes;
* a unit of work consuming it commits (in the same transaction as its effects and its
  ``processed_messages`` row: exactly-once processing);
* ``hub.acknowledge(message)`` is called.

This module only tracks, per mailbox, which message is handed out and not yet
acknowledged. Thread-safe.
"""

from __future__ import annotations

import threading

from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import MessageId

__all__ = ["AckTracker"]


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
