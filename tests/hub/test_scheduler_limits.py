"""A timeout far beyond what the platform can sleep must not disable the runtime's
timers, and a timer thread that dies must fail loudly (pending waits get an error)."""

from __future__ import annotations

import sys
import threading
from datetime import timedelta

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import SchedulerFailedError
from orkeon_actors.model.clock import SystemClock


@pytest.mark.parametrize("huge", [1e10, float(sys.maxsize), timedelta.max, 1e300])
def test_a_huge_finite_timeout_leaves_every_other_wait_working(huge: object) -> None:
    with ok.Runtime.start() as rt:
        client = rt.hub.bind("c", "a")
        tok = ok.CancelToken()
        done = threading.Event()
        outcome: list[BaseException] = []

        rt.hub.register_mailbox("agent://c/b")

        def far_wait() -> None:
            try:
                client.wait_for(ok.WaitOnTopic("never"), huge, cancel=tok)  # type: ignore[arg-type]
            except ok.errors.CancelledError as error:
                outcome.append(error)
            try:
                client.send("agent://c/b", {"q": 1}, huge, cancel=tok)  # type: ignore[arg-type]
            except ok.errors.CancelledError as error:
                outcome.append(error)
            done.set()

        worker = threading.Thread(target=far_wait)
        worker.start()
        ok.testing.wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 1, what="the far wait")
        assert rt.scheduler.failure is None
        short = client.wait_for(ok.WaitOnTopic("other"), 0.05)
        assert short.is_timeout
        with pytest.raises(ok.errors.SendTimeoutError):
            client.send("agent://c/b", {"q": 1}, 0.05)
        tok.cancel()
        worker.join(timeout=30)
        assert done.is_set() and len(outcome) == 2


class _BreakingClock(SystemClock):
    """A system clock whose monotonic() raises once told to: kills the waker thread."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def monotonic(self) -> float:
        if self.broken and threading.current_thread().name == "orkeon-scheduler-waker":
            raise RuntimeError("clock exploded")
        return super().monotonic()


def test_a_dying_timer_thread_fails_pending_waits_and_later_timeouts() -> None:
    clock = _BreakingClock()
    with ok.Runtime.start(clock=clock) as rt:
        client = rt.hub.bind("c", "a")
        errors: list[BaseException] = []

        def blocked() -> None:
            try:
                client.wait_for(ok.WaitOnTopic("never"), 3600)
            except BaseException as error:
                errors.append(error)

        worker = threading.Thread(target=blocked)
        worker.start()
        ok.testing.wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 1, what="the blocked wait")
        clock.broken = True
        rt.scheduler.schedule_in(0.001, lambda: None)  # wakes the waker, which then dies
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], SchedulerFailedError)
        assert "timer thread died" in str(errors[0]) and "RuntimeError" in str(errors[0])
        assert isinstance(rt.scheduler.failure, SchedulerFailedError)
        with pytest.raises(SchedulerFailedError):
            client.wait_for(ok.WaitOnTopic("later"), 1)
