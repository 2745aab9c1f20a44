"""Pending requests: the correlation ids a ``send`` (or ``request``) is waiting on.

A correlation id is *active* from the moment its request is accepted until it is
answered or its deadline passes. ``reply`` is accepted exactly once per active id, and
only from the crew that received the request (:func:`~orkeon_actors.hub.boundary.may_reply`);
an unknown, already answered or expired id, and a replier of another crew, raise the same
``UnknownCorrelationError`` (a prober learns nothing). One requester (crew, agent) has at
most ``Limits.max_pending_requests`` requests pending at once (``LimitExceededError``). A reply
completes the requester's waiter directly (no actor hop, no receive stages: spec §12.1).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from orkeon_actors.errors import SendTimeoutError, UnknownCorrelationError
from orkeon_actors.hub.boundary import may_reply
from orkeon_actors.hub.port import CallerContext
from orkeon_actors.hub.quotas import quota_exceeded
from orkeon_actors.hub.scheduler import TimerHandle
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId
from orkeon_actors.model.message import Message

__all__ = ["PendingRequest", "PendingReplies"]


class PendingRequest:
    """One request in flight. ``outcome`` is the reply message or the timeout error,
    handed to every listener (the ``send`` itself, ``wait_for(WaitOnReply)`` calls)."""

    __slots__ = (
        "correlation_id",
        "deadline",
        "listeners",
        "lock",
        "outcome",
        "requester_agent",
        "requester_crew",
        "requester_key",
        "target",
        "timer",
    )

    def __init__(
        self,
        correlation_id: CorrelationId,
        requester_crew: CrewId,
        target: object,
        listener: Waiter[Message] | None = None,
        requester_agent: AgentId | None = None,
    ) -> None:
        self.correlation_id = correlation_id
        self.requester_crew = requester_crew
        self.requester_agent = requester_agent
        # The quota key: a tuple hashes in C (a CallerContext's attrs hash is a Python
        # call, and the key is hashed four times per request: the hot path, issue 31).
        self.requester_key: tuple[CrewId, AgentId | None] = (requester_crew, requester_agent)
        self.target = target  # the request's mailbox address, for error messages
        self.listeners: list[Waiter[Message]] = [] if listener is None else [listener]
        self.outcome: Message | BaseException | None = None
        self.timer: TimerHandle | None = None
        """The scheduler's timer that expires the request, if one does (a blocking
        ``send`` on the system clock times its own wait instead: see :attr:`deadline`)."""
        self.deadline: float | None = None
        """When the request expires, on the hub clock's ``monotonic`` (``None``: not
        set by whoever opened it)."""
        self.lock = threading.Lock()

    def listen(self, waiter: Waiter[Message]) -> None:
        with self.lock:
            outcome = self.outcome
            if outcome is None:
                self.listeners.append(waiter)
                return
        if isinstance(outcome, BaseException):
            waiter.try_fail(outcome)
        else:
            waiter.try_complete(outcome)

    def unlisten(self, waiter: Waiter[Message]) -> None:
        with self.lock:
            if waiter in self.listeners:
                self.listeners.remove(waiter)

    def settle(self, outcome: Message | BaseException) -> bool:
        with self.lock:
            if self.outcome is not None:
                return False
            self.outcome = outcome
            listeners, self.listeners = self.listeners, []
        if isinstance(outcome, BaseException):
            for waiter in listeners:
                waiter.try_fail(outcome)
        else:
            for waiter in listeners:
                waiter.try_complete(outcome)
        return True


def _timed_out(request: PendingRequest, timeout: float) -> SendTimeoutError:
    return SendTimeoutError(
        f"no reply to request {request.correlation_id} (to {request.target}) within {timeout:g}s; "
        "raise the timeout or check that the recipient reads its mailbox and replies"
    )


def _unknown(correlation_id: str) -> UnknownCorrelationError:
    return UnknownCorrelationError(
        f"no pending request has correlation id {correlation_id}: it is unknown, already "
        "answered, or its deadline passed; reply only once, to the correlation_id of a "
        "request you received"
    )


class PendingReplies:
    """The correlation registry of one hub. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, PendingRequest] = {}
        self._per_requester: dict[tuple[CrewId, AgentId | None], int] = {}

    def open(self, request: PendingRequest, limit: int | None = None) -> None:
        """Register ``request``. Raises ``LimitExceededError`` when its requester already
        has ``limit`` requests pending (the system is not counted)."""
        key = request.requester_key
        with self._lock:
            held = self._per_requester.get(key, 0)
            if limit is not None and held >= limit and not request.requester_crew.is_system:
                raise quota_exceeded("max_pending_requests", limit, CallerContext(*key))
            self._per_requester[key] = held + 1
            self._pending[request.correlation_id] = request

    def _pop(self, correlation_id: str) -> PendingRequest | None:
        """Remove and return a request; the caller holds ``_lock``."""
        request = self._pending.pop(correlation_id, None)
        if request is not None:
            key = request.requester_key
            left = self._per_requester.get(key, 1) - 1
            if left > 0:
                self._per_requester[key] = left
            else:
                self._per_requester.pop(key, None)
        return request

    def pending_of(self, requester: CallerContext) -> int:
        """How many requests ``requester`` has pending."""
        return self._per_requester.get((requester.crew_id, requester.agent_id), 0)

    def get(self, correlation_id: str) -> PendingRequest | None:
        return self._pending.get(correlation_id)

    def require_active(self, correlation_id: str, replier: CallerContext | None = None) -> PendingRequest:
        """The pending request, or ``UnknownCorrelationError`` if it is not awaiting a
        reply or ``replier`` (when given) may not answer it."""
        request = self._pending.get(correlation_id)
        if request is None or request.outcome is not None:
            raise _unknown(correlation_id)
        if replier is not None and not may_reply(replier, request.target):
            raise _unknown(correlation_id)
        return request

    def is_active(self, correlation_id: str) -> bool:
        request = self._pending.get(correlation_id)
        return request is not None and request.outcome is None

    def answer(self, correlation_id: str, reply: Message) -> None:
        """Settle the request with ``reply``. Raises ``UnknownCorrelationError`` if it is
        not active (a second reply loses)."""
        request = self._pending.get(correlation_id)
        if request is None or not request.settle(reply):  # lost a race with another reply or the deadline
            raise _unknown(correlation_id)

    def expire(self, correlation_id: str, timeout: float) -> None:
        """The request's deadline passed: fail its listeners, forget it."""
        with self._lock:
            request = self._pop(correlation_id)
        if request is not None:
            request.settle(_timed_out(request, timeout))

    def expire_request(self, request: PendingRequest, timeout: float) -> SendTimeoutError:
        """``request``'s deadline passed, timed by its requester's own thread: fail its
        listeners with a ``SendTimeoutError`` (unless a reply or another outcome settled
        it first), forget it; that error (for the requester's own waiter)."""
        with self._lock:
            if self._pending.get(request.correlation_id) is request:
                self._pop(request.correlation_id)
        error = _timed_out(request, timeout)
        request.settle(error)
        return error

    def forget(self, correlation_id: str) -> None:
        with self._lock:
            request = self._pop(correlation_id)
        if request is not None and request.timer is not None:
            request.timer.cancel()

    def __len__(self) -> int:
        return len(self._pending)

    def fail_all(self, make_error: Callable[[], BaseException]) -> None:
        """Fail every pending request with an error of its own, ``make_error()``."""
        with self._lock:
            requests = list(self._pending.values())
            self._pending.clear()
            self._per_requester.clear()
        for request in requests:
            request.settle(make_error())
