"""Blocking until a crew finishes: one rule for every way of waiting.

A finished crew leaves a :class:`~orkeon_actors.crew.snapshot.CrewOutcome`. Whoever
hands it over (the lifecycle supervisor once the outcome is durable, or the crew actor
itself for a crew run without a supervisor) calls a callback with it; :func:`await_outcome`
parks the calling thread on that callback and :func:`settle_finished` turns it into the
caller's answer: the outcome of a completed crew, ``CrewFailedError`` for a failed one.

:func:`wait_finished` is that wait on a crew actor ref (a crew started with
``start_crew(ref)``, no supervisor): the crew calls back from its own turn as it
completes or fails (at once if it already did). ``CrewSupervisor.wait_finished`` is the
same wait on the supervisor's durable outcomes.

Guarantees: the timeout is ``None`` (no limit), a positive number of seconds or a
``timedelta``, however large (the thread waits in slices the platform accepts); a wait
that gives up withdraws its callback; Ctrl-C ends a wait in the main thread with
``KeyboardInterrupt``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import timedelta

import attrs
import pykka

from orkeon_actors.crew.delivery import CrewT, query_crew
from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import CrewFailedError, CrewStoppedError, CrewWaitTimeoutError
from orkeon_actors.hub.scheduler import MAX_SLEEP
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.options import to_seconds

__all__ = [
    "FinishWatcher",
    "Unwatch",
    "WatchFinish",
    "await_outcome",
    "finish_timeout",
    "settle_finished",
    "wait_finished",
]

FinishWatcher = Callable[[CrewOutcome | None], None]
"""Told the crew's outcome once it finished; ``None`` when its actor stopped unfinished."""


@attrs.frozen(eq=False)
class WatchFinish:
    """Asked of a crew actor: call ``callback`` with the outcome once the crew finished
    (within this turn if it already did), or with ``None`` if the actor stops first."""

    callback: FinishWatcher


@attrs.frozen(eq=False)
class Unwatch:
    """Told to a crew actor: forget the :class:`WatchFinish` ``watch``."""

    watch: WatchFinish


def finish_timeout(timeout: float | timedelta | None) -> float | None:
    """The seconds of a ``wait_finished`` timeout (``None``: no limit); raises
    ``InvalidArgumentError`` for zero, negative, NaN, infinite or non-numeric values."""
    if timeout is None:
        return None
    return to_seconds(timeout, what="wait_finished timeout (None waits without a limit)")


def await_outcome(
    crew: Callable[[], str],
    register: Callable[[FinishWatcher, float | None], Callable[[], None]],
    timeout: float | None,
    still: Callable[[], str],
) -> CrewOutcome:
    """Block until the callback given to ``register`` is called, then settle the outcome
    (:func:`settle_finished`). ``register(callback, deadline)`` returns the function
    withdrawing the callback, called however the wait ends; it may block until
    ``deadline`` (``time.monotonic()``, ``None``: none) and raise
    ``concurrent.futures.TimeoutError`` once it passed.
    ``timeout`` (seconds, checked by :func:`finish_timeout`) passing raises
    ``CrewWaitTimeoutError``, whose message ends with ``still()`` (what the crew is
    doing); the callback told ``None`` raises ``CrewStoppedError``. ``crew()`` names the
    crew in those messages (asked only then: a ref learns its crew's id as it registers)."""
    done: Future[CrewOutcome | None] = Future()
    deadline = None if timeout is None else time.monotonic() + timeout

    def settle(outcome: CrewOutcome | None) -> None:
        if not done.done():
            done.set_result(outcome)

    try:
        withdraw = register(settle, deadline)
        try:
            outcome = _result(done, deadline)
        finally:
            withdraw()
    except FutureTimeout:
        raise CrewWaitTimeoutError(
            f"crew {crew()} did not finish within {timeout:g} s; it is still {still()}: wait again, or stop it"
        ) from None
    if outcome is None:
        raise CrewStoppedError(
            f"crew {crew()}'s actor stopped before the crew finished (ref.stop(), the runtime stopping, or its "
            "supervisor putting it to sleep): a supervised crew is waited for with sup.wait_finished(crew_id)"
        )
    return settle_finished(crew(), outcome)


def _result(done: Future[CrewOutcome | None], deadline: float | None) -> CrewOutcome | None:
    """``done.result()`` until ``deadline`` (``time.monotonic()``; ``None``: none), in
    slices of at most ``MAX_SLEEP`` seconds (``threading`` refuses one wait beyond
    ``threading.TIMEOUT_MAX``)."""
    while True:
        left = MAX_SLEEP if deadline is None else deadline - time.monotonic()
        try:
            return done.result(max(0.0, min(left, MAX_SLEEP)))
        except FutureTimeout:
            if deadline is not None and left <= MAX_SLEEP:
                raise


def settle_finished(crew_id: CrewId | str, outcome: CrewOutcome) -> CrewOutcome:
    """The outcome of a completed crew; raises ``CrewFailedError`` for a failed one."""
    if outcome.status is CrewStatus.FAILED:
        raise CrewFailedError(
            f"crew {crew_id} failed: {outcome.failure or 'no failure recorded'}; its final state is in "
            "error.outcome.final_snapshot() (and `orkeon store PATH show CREW` while it is kept)",
            crew_id=str(crew_id),
            failure=outcome.failure,
            outcome=outcome,
        )
    return outcome


def wait_finished(ref: pykka.ActorRef[CrewT], timeout: float | timedelta | None = None) -> CrewOutcome:
    """Block until the crew behind ``ref`` finishes (a crew started with
    ``start_crew(ref)``, no supervisor); return its :class:`CrewOutcome` if it completed.

    Raises ``CrewFailedError`` (``failure``, ``outcome``) if it failed,
    ``CrewWaitTimeoutError`` (a ``TimeoutError``; the crew goes on) after ``timeout``
    seconds (``None``: no limit), ``CrewStoppedError`` if its actor is stopped, or stops
    before the crew finished, ``InvalidArgumentError`` for a bad timeout. A crew that
    already finished answers at once, for as long as its actor runs (until ``ref.stop()``).
    A supervised crew's actor stops when it sleeps: wait for it with
    ``CrewSupervisor.wait_finished``, which also answers after a restart."""
    seconds = finish_timeout(timeout)
    name = [f"behind {ref}"]  # its id once the crew answered the watch

    def register(callback: FinishWatcher, deadline: float | None) -> Callable[[], None]:
        told: list[bool] = []  # set by the crew as it calls back: the watch is then forgotten

        def tell(outcome: CrewOutcome | None) -> None:
            told.append(True)
            callback(outcome)

        watch = WatchFinish(tell)
        try:  # an ask, not a tell: a watch queued as the actor stops fails instead of vanishing
            answer = ref.ask(watch, block=False)
            while True:  # the crew answers in its next turn; a long turn counts against the deadline
                left = MAX_SLEEP if deadline is None else deadline - time.monotonic()
                try:
                    name[0] = str(answer.get(timeout=max(0.0, min(left, MAX_SLEEP))))
                    break
                except pykka.Timeout:
                    if deadline is not None and left <= MAX_SLEEP:
                        _unwatch(ref, watch)
                        raise FutureTimeout from None
        except pykka.ActorDeadError:
            callback(None)
            return lambda: None
        # A watch the crew called back is already forgotten: no Unwatch turn for it.
        return lambda: None if told else _unwatch(ref, watch)

    def still() -> str:
        try:
            status: CrewStatus = query_crew(ref, "status", timeout=1.0)
        except pykka.ActorDeadError:
            return "stopped"
        except pykka.Timeout:
            return "busy in a turn (a model or tool call)"
        return status.value.replace("_", " ")

    return await_outcome(lambda: name[0], register, seconds, still)


def _unwatch(ref: pykka.ActorRef[CrewT], watch: WatchFinish) -> None:
    try:
        ref.tell(Unwatch(watch))
    except pykka.ActorDeadError:
        pass  # its actor is gone: so is the watch
