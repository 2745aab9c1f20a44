"""``CrewIdleDetector`` (spec §3.3 ``IdleDetector``, §7.1): touches, per-crew timeouts,
the idle callback, least recently used order."""

from __future__ import annotations

import pytest

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.lifecycle import IdleDetector
from orkeon_actors.lifecycle.idle import CrewIdleDetector
from orkeon_actors.model.clock import VirtualClock
from orkeon_actors.model.ids import CrewId

from .conftest import Env
from .test_wait_scheduler import START, ManualScheduler


class Rig:
    def __init__(self) -> None:
        self.clock = VirtualClock(START)
        self.timers = ManualScheduler(self.clock)
        self.fired: list[CrewId] = []  # timer notifications, handed to the owner's thread
        self.idle: list[CrewId] = []
        self.detector = CrewIdleDetector(self.clock, self.timers, self.fired.append)
        self.detector.on_idle(self.idle.append)

    def advance(self, seconds: float) -> list[CrewId]:
        """Advance the clock, run the owner's checks; the crews reported idle."""
        self.clock.advance(seconds)
        self.idle.clear()
        self.timers.fire()
        while self.fired:
            self.detector.check(self.fired.pop(0))
        return list(self.idle)


A, B, C = CrewId("a"), CrewId("b"), CrewId("c")


def test_an_untouched_crew_is_idle_after_its_timeout_not_before() -> None:
    rig = Rig()
    rig.detector.watch(A, 300)
    assert rig.advance(299) == []
    assert rig.advance(1) == [A]


def test_a_touch_pushes_the_idle_time_back() -> None:
    rig = Rig()
    rig.detector.watch(A, 10)
    rig.advance(8)
    rig.detector.touch(A)
    assert rig.advance(2) == []  # 10 s after the watch, but 2 s after the touch
    assert rig.advance(7) == []
    assert rig.advance(1) == [A]


def test_restart_counts_again_from_now_and_pause_and_forget_silence_it() -> None:
    rig = Rig()
    rig.detector.watch(A, 10)
    rig.detector.watch(B, 10)
    assert sorted(rig.advance(10)) == [A, B]
    rig.detector.restart(A)  # idle but busy: not asleep, try again later
    rig.detector.pause(B)  # snapshotting
    assert rig.advance(10) == [A]
    rig.detector.restart(B)  # its sleep failed: active again
    rig.detector.forget(A)  # asleep
    assert rig.advance(10) == [B]


def test_different_crews_have_their_own_timeouts_and_none_means_never() -> None:
    rig = Rig()
    rig.detector.watch(A, 5)
    rig.detector.watch(B, 20)
    rig.detector.watch(C, None)
    assert rig.advance(5) == [A]
    assert rig.advance(15) == [B]
    assert rig.advance(3600) == []


def test_least_recently_touched_crews_come_first() -> None:
    rig = Rig()
    for crew in (A, B, C):
        rig.detector.watch(crew, None)
        rig.clock.advance(1)
    rig.detector.touch(A)
    assert rig.detector.least_recently_touched([A, B, C], 2) == [B, C]
    assert rig.detector.least_recently_touched([A, B, C], 0) == []


@pytest.mark.parametrize("timeout", [0, -1, True])
def test_a_timeout_that_is_not_a_positive_number_is_refused(timeout: float) -> None:
    with pytest.raises(InvalidArgumentError, match="idle_timeout must be a positive number"):
        Rig().detector.watch(A, timeout)


def test_the_supervisor_refuses_a_bad_idle_timeout(env: Env) -> None:
    with pytest.raises(InvalidArgumentError, match="idle_timeout must be a positive number"):
        env.boot(idle_timeout=0)


def test_it_implements_the_idle_detector_port() -> None:
    assert isinstance(Rig().detector, IdleDetector)
