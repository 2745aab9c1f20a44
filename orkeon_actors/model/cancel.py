"""Explicit cancellation (Trio-style) and agent budgets (spec §9.4).

A :class:`CancelToken` is passed as ``cancel=`` to any blocking call. When it fires,
the call raises the token's error: :class:`~orkeon_actors.errors.CancelledError` for a
plain ``cancel()``, :class:`~orkeon_actors.errors.BudgetExhaustedError` when a
:class:`Budget` ran out. A budget error is never a ``TimeoutError``, so a supervisor
can tell "no message in time" from "no budget left".
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from datetime import timedelta

from orkeon_actors.errors import BudgetExhaustedError, CancelledError, EventHubError
from orkeon_actors.model.clock import Clock, SystemClock
from orkeon_actors.model.options import to_seconds

__all__ = ["CancelToken", "Budget"]

CancelCallback = Callable[[EventHubError], None]
_callback_keys = itertools.count()


class CancelToken:
    """A one-shot, thread-safe cancellation signal.

    ``deadline`` (monotonic seconds on the runtime clock) is optional: the hub fires
    the token itself when a blocking call is still running at that instant. Budgets use
    it for their wall-time limit.
    """

    __slots__ = ("_callbacks", "_deadline_error", "_error", "_lock", "_unlink", "deadline")

    def __init__(self, deadline_error: Callable[[], EventHubError] | None = None) -> None:
        """``deadline_error``: the error the token fires with when its :attr:`deadline`
        passes (:meth:`fire_deadline`; default: a ``CancelledError``)."""
        self._lock = threading.Lock()
        self._error: EventHubError | None = None
        self._callbacks: dict[int, CancelCallback] | None = None  # made by the first on_cancel
        self.deadline: float | None = None
        self._deadline_error = deadline_error
        self._unlink: Callable[[], None] = _noop

    @property
    def cancelled(self) -> bool:
        return self._error is not None

    @property
    def error(self) -> EventHubError | None:
        """The error a call cancelled by this token raises, or ``None`` if not fired."""
        return self._error

    def cancel(self, error: EventHubError | None = None) -> None:
        """Fire the token (idempotent: the first error wins)."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error or CancelledError("the operation was cancelled by its CancelToken")
            callbacks = list(self._callbacks.values()) if self._callbacks else []
            self._callbacks = None
        for callback in callbacks:
            callback(self._error)

    def fire_deadline(self) -> None:
        """Fire the token because its ``deadline`` passed."""
        if self._deadline_error is not None:
            self.cancel(self._deadline_error())
        else:
            self.cancel(CancelledError("the CancelToken's deadline passed"))

    def raise_if_cancelled(self) -> None:
        if self._error is not None:
            raise self._error

    def on_cancel(self, callback: CancelCallback) -> Callable[[], None]:
        """Run ``callback(error)`` when the token fires (at once if it already has).

        Returns a function that unregisters the callback.
        """
        with self._lock:
            if self._error is None:
                key = next(_callback_keys)
                if self._callbacks is None:
                    self._callbacks = {}
                self._callbacks[key] = callback
                return functools.partial(self._remove, key)  # lighter than a closure: one per wait
            error = self._error
        callback(error)
        return _noop

    def _remove(self, key: int) -> None:
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.pop(key, None)

    def child(self) -> CancelToken:
        """A token that fires with this token's error when this one fires (at once if it
        already has), shares its ``deadline`` (and the error the deadline raises), and
        can also be fired on its own without firing this one: a caller cancelling one
        operation of a budgeted agent cancels that operation, not the budget.

        The link lives until the child fires or :meth:`detach` is called on the child;
        call it when the operation ends, or this token keeps a callback per child."""
        child = CancelToken()
        child.deadline = self.deadline
        child._deadline_error = self._deadline_error
        child._unlink = self.on_cancel(child.cancel)
        return child

    def detach(self) -> None:
        """Forget the parent this token was made from by :meth:`child` (idempotent; a
        token without a parent ignores it)."""
        unlink, self._unlink = self._unlink, _noop
        unlink()


def _noop() -> None:
    return None


_USAGE = threading.Lock()
"""Guards every budget's counters (a few additions each time: a lock per budget was
88 bytes per live agent)."""


class Budget:
    """An agent's execution budget: tokens, tool calls, wall time, cost.

    ``budget.token`` is a :class:`CancelToken` that fires with
    ``BudgetExhaustedError`` as soon as any limit is exceeded: pass it as ``cancel=`` to
    the agent's waits. Wall time runs on ``clock`` (the runtime's, so a virtual clock
    drives it in simulations) from construction or the last :meth:`restart_wall_time`.
    """

    __slots__ = (
        "clock",
        "cost_used",
        "max_cost",
        "max_tokens",
        "max_tool_calls",
        "max_wall_time",
        "started_at",
        "token",
        "tokens_used",
        "tool_calls_used",
    )

    def __init__(
        self,
        max_wall_time: float | timedelta | None = None,
        max_tokens: int | None = None,
        max_tool_calls: int | None = None,
        max_cost: float | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.max_wall_time = None if max_wall_time is None else to_seconds(max_wall_time, what="max_wall_time")
        self.max_tokens = max_tokens
        self.max_tool_calls = max_tool_calls
        self.max_cost = max_cost
        self.tokens_used = 0
        self.tool_calls_used = 0
        self.cost_used = 0.0
        # Not a bound method: the token would refer back to its budget (a cycle freed by
        # a full collection only, for every agent that finishes).
        limit = self.max_wall_time
        self.token = CancelToken(deadline_error=None if limit is None else functools.partial(_wall_time_error, limit))
        self.started_at = self.clock.monotonic()
        if self.max_wall_time is not None:
            self.token.deadline = self.started_at + self.max_wall_time

    @property
    def exhausted(self) -> bool:
        self.check_wall_time()
        return self.token.cancelled

    @property
    def reason(self) -> str | None:
        """Why the budget is exhausted, or ``None``."""
        err = self.token.error
        return None if err is None else str(err)

    def consume(self, *, tokens: int = 0, tool_calls: int = 0, cost: float = 0.0) -> None:
        """Record usage; fires the token if a limit is now exceeded."""
        with _USAGE:
            self.tokens_used += tokens
            self.tool_calls_used += tool_calls
            self.cost_used += cost
            problem = self._over_limit()
        if problem:
            self.token.cancel(BudgetExhaustedError(problem))

    def check_wall_time(self) -> None:
        if self.token.deadline is not None and self.clock.monotonic() >= self.token.deadline:
            self.token.fire_deadline()

    def raise_if_exhausted(self) -> None:
        self.check_wall_time()
        self.token.raise_if_cancelled()

    def _over_limit(self) -> str | None:
        if self.max_tokens is not None and self.tokens_used > self.max_tokens:
            return f"token budget exhausted ({self.tokens_used} > {self.max_tokens} tokens)"
        if self.max_tool_calls is not None and self.tool_calls_used > self.max_tool_calls:
            return f"tool-call budget exhausted ({self.tool_calls_used} > {self.max_tool_calls} calls)"
        if self.max_cost is not None and self.cost_used > self.max_cost:
            return f"cost budget exhausted ({self.cost_used:g} > {self.max_cost:g})"
        return None


def _wall_time_error(limit: float) -> EventHubError:
    return BudgetExhaustedError(f"wall-time budget of {limit:g}s exhausted; raise max_wall_time or split the work")
