"""The hub core's waits: registering a waiter where its message will arrive, blocking
the caller's thread on it, and settling it by a timeout, a cancel token or hub stop.

:class:`HubWaits` owns one part of :class:`~orkeon_actors.hub.memory.HubCore`'s state,
the waiters currently blocked or pending (and their kind), and reaches everything else
through the core's public protocol (its router, live mailboxes, pending requests,
receive stages), so overriding a core hook still takes effect here. Lock contract: the
tracked waiters are one dict whose single operations are atomic, so the hot path takes
no lock; :meth:`HubWaits.pending_waits` and :meth:`HubWaits.fail_all` read a snapshot.
Only the caller's own thread blocks (ARCHITECTURE §3).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from orkeon_actors.errors import EventHubError, HubStoppedError, MailboxNotFoundError, UnknownCorrelationError
from orkeon_actors.hub.handles import TopicWait, WaitRegistration
from orkeon_actors.hub.leases import HubLease, TimedOutLease, received
from orkeon_actors.hub.mailbox import LeaseWaiter
from orkeon_actors.hub.observe import wait_info
from orkeon_actors.hub.port import CallerContext, MailboxLease
from orkeon_actors.hub.scheduler import TimerHandle
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.ids import MessageId, new_ulid_str
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import (
    ForeverWaitTimeout,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
)

if TYPE_CHECKING:
    from orkeon_actors.hub.memory import HubCore

__all__ = ["WAIT_KINDS", "HubWaits", "admit_wait"]


WAIT_KINDS = ("on_topic", "on_mailbox", "on_reply")


def admit_wait(
    hub: HubCore, descriptor: WaitDescriptor, timeout: WaitTimeout, cancel: CancelToken | None
) -> float | None:
    """What every wait, blocking or not, checks and notes before it registers: its
    monotonic deadline on the hub's clock (``None``: forever). Raises
    ``HubStoppedError`` on a stopped hub and the token's error if ``cancel`` already
    fired; a mailbox wait marks its mailbox as read (``HubCore.receiving``)."""
    if hub.stopped:
        raise HubStoppedError("the runtime was stopped; start a new Runtime")
    if cancel is not None:
        cancel.raise_if_cancelled()
    if isinstance(descriptor, WaitOnMailbox):
        hub.receiving(descriptor.address)
    return None if isinstance(timeout, ForeverWaitTimeout) else hub.clock.monotonic() + timeout.seconds


class HubWaits:
    """The waits of one hub core ``hub``: its ``wait_for``, ``register_wait``,
    ``expire_wait``, ``block`` and the count of its pending waits delegate here."""

    def __init__(self, hub: HubCore) -> None:
        self._hub = hub
        self._active_waiters: dict[Waiter[Message], str] = {}

    def wait_for(
        self, caller: CallerContext, descriptor: WaitDescriptor, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> Message:
        hub = self._hub
        deadline = admit_wait(hub, descriptor, timeout, cancel)
        wait_id = new_ulid_str()
        started_at = hub.clock.now()
        receive = hub.receive_wait
        while True:
            message = self._wait_once(caller, descriptor, deadline, wait_id, started_at, cancel)
            if message.is_timeout or isinstance(descriptor, WaitOnReply):
                return message
            consumed = hub.consume(receive, message)
            if consumed is not None:
                return consumed

    def lease(
        self, caller: CallerContext, address: MailboxAddress, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> MailboxLease:
        """See :meth:`EventHub.lease <orkeon_actors.hub.port.EventHub.lease>`: a mailbox
        wait whose waiter is a :class:`LeaseWaiter`, so the message it gets is held,
        not consumed. A message a receive stage drops is consumed, and the wait goes on."""
        hub = self._hub
        descriptor = WaitOnMailbox(address)
        deadline = admit_wait(hub, descriptor, timeout, cancel)
        wait_id = new_ulid_str()
        started_at = hub.clock.now()
        while True:
            handle = hub.live_mailbox(address)
            if handle is None:
                raise MailboxNotFoundError(address)
            waiter = LeaseWaiter(handle)
            message = self._wait_once(caller, descriptor, deadline, wait_id, started_at, cancel, waiter)
            if message.is_timeout:
                return TimedOutLease(message)
            lease = HubLease(hub, waiter, message)
            try:
                consumed = received(hub, message)
            except BaseException:
                lease.confirm_quietly()  # a refusing stage consumes it, as wait_for does
                raise
            if consumed is not None:
                lease.message = consumed
                return lease
            lease.confirm_quietly()

    def register_wait(
        self, caller: CallerContext, descriptor: WaitDescriptor, waiter: Waiter[Message]
    ) -> WaitRegistration:
        """See :meth:`HubCore.register_wait <orkeon_actors.hub.memory.HubCore.register_wait>`."""
        hub = self._hub
        if isinstance(descriptor, WaitOnTopic):
            router = hub.router
            entry = TopicWait(descriptor.topic, caller.crew_id, descriptor.metadata_match, waiter, router)
            router.add(entry)
            return WaitRegistration("on_topic", descriptor.topic, entry.withdraw)
        if isinstance(descriptor, WaitOnMailbox):
            handle = hub.live_mailbox(descriptor.address)
            if handle is None:
                raise MailboxNotFoundError(descriptor.address)
            if type(waiter) is LeaseWaiter:
                waiter.handle.add_lease(waiter)  # on the handle it was made for (a reopened one refuses)
                return WaitRegistration(
                    "on_mailbox", str(descriptor.address), functools.partial(waiter.handle.remove_lease, waiter)
                )
            handle.add_waiter(waiter)
            return WaitRegistration(
                "on_mailbox", str(descriptor.address), functools.partial(handle.remove_waiter, waiter)
            )
        correlation = descriptor.correlation
        request = hub.pending_request(correlation)
        if request is None:
            raise UnknownCorrelationError(
                f"no request with correlation id {correlation} is pending; "
                "wait on the correlation_id of a request you started with request()"
            )

        def cleanup() -> None:
            request.unlisten(waiter)
            settled, value, _ = waiter.peek()
            if settled and value is not None and not value.is_timeout:
                hub.forget_request(correlation)  # the reply was consumed

        return WaitRegistration("on_reply", str(correlation), cleanup, lambda: request.listen(waiter))

    def _wait_once(
        self,
        caller: CallerContext,
        descriptor: WaitDescriptor,
        deadline: float | None,
        wait_id: str,
        started_at: datetime,
        cancel: CancelToken | None,
        waiter: Waiter[Message] | None = None,
    ) -> Message:
        hub = self._hub
        if waiter is None:
            waiter = Waiter()
        registration = hub.register_wait(caller, descriptor, waiter)
        registration.listen()
        kind, original, cleanup = registration.kind, registration.original, registration.cleanup
        timer: TimerHandle | None = None
        if deadline is not None:
            timer = hub.scheduler.schedule_at(
                deadline,
                lambda: hub.expire_wait(waiter, caller, original, wait_id, started_at),
            )
        observer = hub.wait_observer
        if observer is not None:
            remaining = None if deadline is None else deadline - hub.clock.monotonic()
            observer.wait_started(
                wait_info(wait_id, caller.crew_id, caller.agent_id, kind, original, started_at, remaining)
            )
        try:
            return hub.block(waiter, kind, cancel)
        finally:
            if timer is not None:
                timer.cancel()
            cleanup()
            if observer is not None:
                observer.wait_ended(wait_id)

    def expire_wait(
        self, waiter: Waiter[Message], caller: CallerContext, original: str, wait_id: str, started_at: object
    ) -> None:
        hub = self._hub
        timed_out = Message.wait_timed_out(
            message_id=MessageId.new(),
            at=hub.clock.now(),
            original_topic=original,
            wait_id=wait_id,
            started_at=started_at,  # type: ignore[arg-type]
            target_crew_id=None if caller.is_system else caller.crew_id,
        )
        if waiter.try_complete(timed_out) and hub.on_wait_timed_out is not None:
            hub.on_wait_timed_out(timed_out)

    def block(
        self,
        waiter: Waiter[Message],
        kind: str,
        cancel: CancelToken | None,
        deadline: float | None = None,
        on_deadline: Callable[[], BaseException] | None = None,
    ) -> Message:
        """Block the calling thread on ``waiter``, honouring ``cancel`` and hub stop.

        With a ``deadline`` (on ``time.monotonic``: only a hub on the system clock
        passes one), this thread times the wait itself: once it passes, ``waiter``
        fails with the error ``on_deadline()`` returns, unless another outcome won
        (:meth:`Waiter.wait_until <orkeon_actors.hub.waiter.Waiter.wait_until>`)."""
        hub = self._hub
        unregister: Callable[[], None] | None = None
        budget_timer: TimerHandle | None = None
        if cancel is not None:
            unregister = cancel.on_cancel(waiter.fail)
            if cancel.deadline is not None and not cancel.cancelled:
                budget_timer = hub.scheduler.schedule_at(cancel.deadline, cancel.fire_deadline)
        self._active_waiters[waiter] = kind
        if hub.stopped:
            waiter.try_fail(HubStoppedError("the runtime was stopped while waiting"))
        try:
            if on_deadline is not None and deadline is not None:
                return waiter.wait_until(deadline, on_deadline)
            return waiter.wait()
        finally:
            self._active_waiters.pop(waiter, None)  # fail_all may have taken it already
            if unregister is not None:
                unregister()
            if budget_timer is not None:
                budget_timer.cancel()

    def pending_waits(self) -> dict[str, int]:
        counts = dict.fromkeys(WAIT_KINDS, 0)
        for kind in list(self._active_waiters.values()):
            counts[kind] += 1
        return counts

    def track_waiter(self, waiter: Waiter[Message], kind: str) -> None:
        """Count ``waiter`` in :meth:`pending_waits` (and fail it at stop) until untracked."""
        self._active_waiters[waiter] = kind

    def untrack_waiter(self, waiter: Waiter[Message]) -> None:
        self._active_waiters.pop(waiter, None)

    def fail_all(self, make_error: Callable[[], EventHubError]) -> None:
        """Fail every tracked waiter with an error of its own, ``make_error()`` (a
        runtime stop, the timer thread's death). Never one object for all: each waiter
        re-raises its error, and a shared one would gather every raise's traceback.

        The tracked waiters are taken whole first (a waiter failed here needs no
        untracking, one by one: 100,000 at a stop), so :meth:`pending_waits` counts
        none of them from then on."""
        waiters, self._active_waiters = self._active_waiters, {}
        for waiter in list(waiters):  # a snapshot: a waiter settling meanwhile may still untrack from it
            waiter.try_fail(make_error())
