"""DELIVERED receipts: a poster that asked for one (``post(..., confirm_delivery=True)``)
learns that the recipient's host holds its message, or fails fast and typed.

The receiving gateway sends a receipt for a post carrying ``receipt`` once it holds it:
after its store committed it and the delivery was acknowledged to the broker (a post
already held, redelivered or repeated, is confirmed again, so a receipt lost with a
connection is sent once more with the copy that follows it). The receipt is signed by
that gateway (sender ``_gateway@<host>``) and published on ``fleet.msg`` keyed
``receipt.<poster's host>``, so it reaches the poster's durable ``receipts.<host>`` queue
and is verified there like every cross-host message, then settles the waiting post. Not
``mandatory``: a poster gone meanwhile has nobody waiting. The queue is durable (not
exclusive to one connection), so a receipt sent while the poster's connection is down
waits there (up to ``RECEIPT_TTL_MS``) and settles the post once it reconnected.

:class:`Receipts` is the poster's side: :meth:`Receipts.expect` before publishing,
:meth:`Receipts.wait` after the broker's confirm. Guarantees:

* **Bounded.** :meth:`Receipts.wait` returns once the receipt came, or raises
  ``DeliveryNotConfirmedError`` after ``timeout`` seconds (the poster's
  ``FleetConfig.delivery_timeout``, counted from the broker's confirm): a stalled, dead
  or overloaded recipient host is reported in that bound, not after a send timeout.
* **Nothing withdrawn.** A missing receipt says nothing about loss: the broker confirmed
  the message, so it waits in the recipient's durable inbox and is delivered once that
  host consumes again (a late receipt then finds nobody waiting and is dropped with a
  DEBUG log). A receipt is not lost when the poster's own connection drops after the
  broker's confirm: it waits in ``receipts.<host>``, and a poster that reconnects within
  its ``delivery_timeout`` gets its confirmation. One that reconnects later gets
  ``DeliveryNotConfirmedError`` although the message was delivered (its text says so).
* **Only the recipient's host confirms.** A receipt counts only if it was signed by the
  host that holds the inbox (the verified signing host of the receipt is compared with
  the host the poster saw announcing the mailbox when it posted).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from loguru import logger

from orkeon_actors.errors import DeliveryNotConfirmedError
from orkeon_actors.fleet.signing import Signer
from orkeon_actors.hub.amqp.link import Outgoing
from orkeon_actors.hub.amqp.topology import MSG_EXCHANGE, RECEIPT_TTL_MS, receipt_key
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.wire import amqp as wire

__all__ = ["Receipts", "receipt_for"]

_log = logger.bind(component="orkeon_actors.fleet")


def receipt_for(envelope: wire.Envelope, address: MailboxAddress, signer: Signer, gateway: str) -> Outgoing:
    """The signed receipt of ``envelope`` (a post held in ``address`` here) for its
    poster's host; ``gateway`` is this host's gateway entity (its sender)."""
    to = receipt_key(envelope.host)
    headers, body = wire.encode_receipt(
        str(envelope.message.id), str(address), sender=gateway, to=to, expires_at_ms=envelope.expires_at_ms
    )
    signed = signer.sign(headers, body)
    message_id = str(signed["message_id"])
    return Outgoing(
        MSG_EXCHANGE, to, body, message_id, signed, mandatory=False, expiration_ms=RECEIPT_TTL_MS, persistent=False
    )


class Receipts:
    """The posts of this host waiting for their receipt (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[str | None, Future[wire.Receipt]]] = {}

    def expect(self, message_id: str, host: str | None) -> None:
        """Wait for the receipt of ``message_id`` from ``host`` (the one announcing its
        recipient); call before publishing, so that no receipt can outrun it."""
        with self._lock:
            self._waiting[message_id] = (host, Future())

    def delivered(self, receipt: wire.Receipt) -> None:
        """A verified receipt arrived: settle the post waiting for it, if any."""
        with self._lock:
            waiting = self._waiting.get(receipt.message_id)
        if waiting is None:
            _log.debug("receipt of message {} from {}: nobody waits for it any more", receipt.message_id, receipt.host)
            return
        host, future = waiting
        if host is not None and receipt.host != host:
            _log.warning(
                "receipt of message {} signed by {}, but {} announced its recipient: ignored",
                receipt.message_id,
                receipt.host,
                host,
            )
            return
        if not future.done():
            future.set_result(receipt)

    def wait(self, message_id: str, recipient: str, timeout: float) -> wire.Receipt:
        """The receipt of ``message_id`` (expected with :meth:`expect`), within
        ``timeout`` seconds; ``DeliveryNotConfirmedError`` without one. Forgets the wait
        either way."""
        with self._lock:
            waiting = self._waiting.get(message_id)
        if waiting is None:
            raise KeyError(f"no receipt is expected for message {message_id}: call expect() before publishing")
        host, future = waiting
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise DeliveryNotConfirmedError(
                f"message {message_id} to {recipient} was taken by the broker, but host {host!r} did not confirm "
                f"holding it within {timeout} s: that host is stalled, overloaded or down (or this host's own "
                "connection was down until the bound, its receipt may come late). The message is not "
                "withdrawn: it waits in the recipient's inbox and is delivered once the host consumes again. Check "
                "the host, or raise FleetConfig.delivery_timeout; posting it again would make another message",
                message_id=message_id,
                recipient=recipient,
                host=host,
            ) from None
        finally:
            self.forget(message_id)

    def forget(self, message_id: str) -> None:
        """Stop waiting for ``message_id``'s receipt (its publish failed)."""
        with self._lock:
            self._waiting.pop(message_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)
