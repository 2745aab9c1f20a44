"""Delivery failures for a sender without a mailbox (cross-host messaging design, §10.1).

The dead-letter reporter tells a sender that one of its messages was dead-lettered by
posting a :class:`~orkeon_actors.fleet.dead_letters.DeliveryFailed` to its mailbox. A
poster that has none (a client bound to a crew id, ``hub.bind("front", "x")``, that never
registered ``agent://front/x``) could not hear it. :class:`SenderReports` is the
``report`` of a fleet host's reporter that closes that gap:

1. it posts to the sender's mailbox when there is one (as before);
2. otherwise it hands the failure to the **sender's host** (the host that signed the
   message): kept there in a bounded book, :meth:`FailureBook.get` by message id
   (``rt.fleet.delivery_failed(message_id)``), and told to every callback of
   ``rt.fleet.on_delivery_failed``. The hand-off is the control operation
   ``delivery_failed`` (signed and verified like every control request), or a direct
   call when the reporting host is the sender's.

The book keeps the latest :data:`KEPT` failures (oldest dropped first): a poster that
needs every one registers a callback, or a mailbox.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import attrs
from loguru import logger

from orkeon_actors.errors import FleetControlError, InvalidArgumentError, MailboxNotFoundError
from orkeon_actors.fleet.control import ControlPlane
from orkeon_actors.fleet.dead_letters import DeadLetter, DeliveryFailed

__all__ = ["KEPT", "OP", "FailureBook", "SenderReports"]

KEPT: Final = 10_000
OP: Final = "delivery_failed"
"""The control operation that hands a failure to its sender's host."""
_log = logger.bind(component="orkeon_actors.fleet")


class FailureBook:
    """The delivery failures of this host's senders that have no mailbox: by message id
    (the latest :data:`KEPT`), and told to the callbacks in :attr:`listeners`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, DeliveryFailed] = OrderedDict()
        self.listeners: list[Callable[[DeliveryFailed], None]] = []

    def add(self, failure: DeliveryFailed) -> None:
        with self._lock:
            self._kept[failure.message_id] = failure
            self._kept.move_to_end(failure.message_id)
            if len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        for listener in list(self.listeners):
            try:
                listener(failure)
            except Exception:  # one listener's bug must not hide the failure from the others
                _log.opt(exception=True).error("a delivery-failure callback failed on {}", failure.message_id)

    def get(self, message_id: str) -> DeliveryFailed | None:
        with self._lock:
            return self._kept.get(str(message_id))

    def served(self, _sender_host: str, request: dict[str, Any]) -> dict[str, Any]:
        """The ``delivery_failed`` control operation: keep the failure sent here."""
        self.add(
            DeliveryFailed(
                str(request["message_id"]), str(request["to"]), str(request["reason"]), str(request["queue"])
            )
        )
        return {}


@attrs.frozen
class SenderReports:
    """``report`` for the dead-letter reporter (module docstring): ``to_mailbox`` posts
    to the sender's mailbox; ``book`` is this host's, ``control`` reaches the others."""

    host_id: str
    to_mailbox: Callable[[DeadLetter], None]
    book: FailureBook
    control: ControlPlane

    def __call__(self, dead: DeadLetter) -> None:
        try:
            self.to_mailbox(dead)
            return
        except (MailboxNotFoundError, InvalidArgumentError) as exc:
            if not dead.sender.startswith(("agent://", "crew://", "client://")):
                raise  # a gateway's own traffic: nobody to tell
            why = exc
        failure = DeliveryFailed(dead.message_id, dead.recipient.removeprefix("mbox."), dead.reason, dead.queue)
        host = str(dead.headers.get("host", ""))
        if host == self.host_id:
            self.book.add(failure)
            return
        try:
            self.control.ask(host, {"op": OP, **attrs.asdict(failure)}, timeout=10.0)
        except FleetControlError as exc:
            raise MailboxNotFoundError(
                dead.sender, detail=f"{why}; and its host {host!r} did not take the failure either: {exc}"
            ) from exc
