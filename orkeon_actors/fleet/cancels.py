"""A requester's cancel, told to the replier's host: a ``send`` cancelled on host A makes
the request it sent to a mailbox on host B unanswerable on B too, as on one host.

When a ``send`` to a mailbox of another host is cancelled (its ``CancelToken``), the
requester's hub raises ``CancelledError`` as always, but first asks the host announcing
the mailbox, on ``fleet.control`` (op ``cancel_request``, signed both ways), to withdraw
the request: B forgets its pending request and its kept reply route, so the replier's
``reply`` raises ``UnknownCorrelationError`` there, at once, instead of being accepted
and dropped at the requester. The request message itself stays in the mailbox (as on one
host: a cancel withdraws the wait, not the message).

Guarantees and limits:

* **Bounded.** The cancelled ``send`` returns (raises ``CancelledError``) once B
  answered, or after ``CANCEL_TIMEOUT`` seconds with a WARNING (B down or slow: the reply
  is then refused at the requester as before, ``UnknownCorrelationError`` dead-lettered).
* **Before or after arrival.** A cancel that reaches B before the request itself is
  remembered (the last ``EARLY_MAX`` of them, from the host that sent it only), and the
  request is kept in the mailbox without a reply route when it arrives.
* **Only the requester's host.** B honours a cancel for a request not arrived yet only
  when it comes later from the host that asked; the control message is verified like
  every cross-host message.
* **Across B's restart.** A withdrawn request stays withdrawn when B restarts: B answers
  the cancel only once the request's kept reply route is deleted (committed), and a
  request cancelled before it arrived is kept in the mailbox without ever having its
  route written, so B's boot has nothing to reopen (the agent reading it after the
  restart gets ``UnknownCorrelationError`` from ``reply``, as before the restart).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from loguru import logger

from orkeon_actors.errors import BrokerError, EventHubError
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CorrelationId

if TYPE_CHECKING:
    from orkeon_actors.fleet.control import ControlPlane
    from orkeon_actors.fleet.hub import AmqpEventHub
    from orkeon_actors.fleet.remote_requests import RemoteRequest

__all__ = ["CANCEL_TIMEOUT", "EARLY_MAX", "OP", "RemoteCancels"]

OP: Final = "cancel_request"
"""The control operation: ``{"op": "cancel_request", "correlation_id"}``."""
CANCEL_TIMEOUT: Final = 5.0
"""Seconds a cancelled ``send`` waits for the replier's host to withdraw the request."""
EARLY_MAX: Final = 10_000
"""Cancels remembered for requests that have not arrived yet (oldest forgotten first)."""

_log = logger.bind(component="orkeon_actors.fleet")


class RemoteCancels:
    """Both sides of the cancel (see the module docstring)."""

    def __init__(self, hub: AmqpEventHub, control: ControlPlane) -> None:
        self.hub = hub
        self.control = control
        self._lock = threading.Lock()
        self._early: OrderedDict[str, str] = OrderedDict()
        self.withdrawn = 0
        """Requests withdrawn here by their requester's cancel (a metric)."""
        control.ops[OP] = self.serve
        hub.remote_cancels = self
        hub.on_send_cancelled = self.send_cancelled

    def send_cancelled(self, correlation_id: CorrelationId, to: MailboxAddress) -> None:
        """The core's hook for a cancelled ``send``: a request to a mailbox another host
        announces is withdrawn there (:meth:`propagate`); a local one needs nothing."""
        host = self.hub.where(to)
        if host is not None and host != self.hub.host_id:
            self.propagate(host, correlation_id)

    # -- the requester's side -------------------------------------------------------------

    def propagate(self, host: str, correlation_id: CorrelationId) -> None:
        """Ask ``host`` to withdraw request ``correlation_id`` (its ``send`` was
        cancelled here); bounded by :data:`CANCEL_TIMEOUT`, a failure only logged."""
        try:
            self.control.ask(host, {"op": OP, "correlation_id": str(correlation_id)}, timeout=CANCEL_TIMEOUT)
        except (BrokerError, EventHubError) as exc:
            _log.warning(
                "host {}: the cancel of request {} was not told to host {} ({}): its reply is refused here instead",
                self.hub.host_id,
                correlation_id,
                host,
                exc,
            )

    # -- the replier's side ---------------------------------------------------------------

    def serve(self, host: str, request: dict[str, Any]) -> dict[str, Any]:
        """Host ``host`` cancelled its request: withdraw it here (or remember the cancel
        until it arrives)."""
        correlation_id = CorrelationId(str(request["correlation_id"]))
        with self._lock:  # against open_unless_cancelled: a cancel is never lost in between
            if self.hub.withdraw_request(correlation_id):
                self.withdrawn += 1
                return {"withdrawn": True}
            self._early[str(correlation_id)] = host
            while len(self._early) > EARLY_MAX:
                self._early.popitem(last=False)
        return {"withdrawn": False}

    def open_unless_cancelled(
        self, routes: Sequence[RemoteRequest], open_routes: Callable[[list[RemoteRequest]], None]
    ) -> list[RemoteRequest]:
        """Run ``open_routes`` (keep and open) with the requests of ``routes`` arriving
        now, less those their requester's host cancelled before they arrived (each such
        cancel is then forgotten: asked once). The requests opened."""
        with self._lock:  # against serve: a cancel is either early here or finds the request open
            admitted: list[RemoteRequest] = []
            for route in routes:
                key = str(route.correlation_id)
                if self._early.get(key) == route.reply_host:
                    del self._early[key]
                    self.withdrawn += 1
                else:
                    admitted.append(route)
            open_routes(admitted)
            return admitted
