"""The intent protocol of a send, for hubs whose recipient copy lives elsewhere
(sender-owned history requirements, MESSAGE-R05, R06, T01).

A send is three steps, in this order, each durable before the next starts:

1. **reserve** the sender's intent with the message's original bytes
   (:meth:`IntentLog.reserve`; a reused idempotency key returns the original message
   instead, and nothing else happens);
2. **materialise** the recipient copy, idempotently by message id
   (:meth:`Materialiser.materialise`): on the distributed hub, publish to the broker and
   return only after its confirm (or the recipient gateway's receipt); the receiving
   side drops a message id it already holds;
3. **complete** the sender row (:meth:`IntentLog.complete`: row, ledger node, head, the
   intent dropped, in one local transaction; completing twice is a no-op).

So a completed row proves the recipient copy was made at least once; an interrupted
send leaves a pending intent (the coverage reads ``partial``), never a completed row
before its copy. :func:`resume` runs steps 2 and 3 again for every pending intent, with
the same bytes: at the sender's next operation and at boot. Step 2 being idempotent,
that never makes a second recipient copy, and step 3 never a second row.

The embedded store needs none of this for posts (the three steps share one
transaction: :mod:`orkeon_actors.store.sent_history`); its
:class:`~orkeon_actors.store.sent_history.SqliteSentHistory` is the :class:`IntentLog`
a host's adapter uses, whatever carries its messages.
"""

from __future__ import annotations

from typing import Protocol

from orkeon_actors.history.endpoint import Endpoint
from orkeon_actors.history.records import SentIntent
from orkeon_actors.model.message import Message

__all__ = ["IntentLog", "Materialiser", "resume", "send_through"]


class IntentLog(Protocol):
    """Where a host keeps its senders' intents and rows (its local store)."""

    def reserve(self, intent: SentIntent) -> Message | None:
        """Durably reserve ``intent`` (committed when this returns); the original
        message instead when its idempotency key was used with the same content. Raises
        ``IdempotencyKeyConflictError`` for the key with other content."""
        ...

    def complete(self, intent: SentIntent) -> None:
        """Record the completed row of a materialised ``intent`` and drop the intent,
        in one transaction; a no-op for one completed already."""
        ...

    def pending(self, sender: Endpoint) -> list[SentIntent]:
        """``sender``'s intents not completed yet, oldest first, with their original
        bytes."""
        ...


class Materialiser(Protocol):
    """How the recipient copy of a send is made, idempotently by message id."""

    def materialise(self, intent: SentIntent) -> None:
        """Make sure the recipient holds ``intent.message`` (returns once that is
        durable: after the broker's confirm). Materialising an id twice makes one copy.
        Raises when it cannot (the intent stays pending)."""
        ...


def send_through(log: IntentLog, materialiser: Materialiser, intent: SentIntent) -> Message:
    """Send ``intent`` with the three steps of the module docstring; returns the message
    (the original one for a reused key). A failure after the reservation leaves the
    intent pending for :func:`resume`."""
    original = log.reserve(intent)
    if original is not None:
        return original
    materialiser.materialise(intent)
    log.complete(intent)
    return intent.message


def resume(log: IntentLog, materialiser: Materialiser, sender: Endpoint) -> int:
    """Finish every pending intent of ``sender`` with its original bytes; returns how
    many. Stops at the first one that still cannot be materialised (it stays pending, and
    so do the later ones: a sender's sends complete in order)."""
    done = 0
    for intent in log.pending(sender):
        materialiser.materialise(intent)
        log.complete(intent)
        done += 1
    return done
