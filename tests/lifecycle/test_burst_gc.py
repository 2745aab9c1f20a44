"""A burst of expiries postpones CPython's full collections, bounded, and puts the
thresholds it found back."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from orkeon_actors.bench import lifecycle as bench
from orkeon_actors.crew import CrewStatus
from orkeon_actors.lifecycle import burst_gc
from orkeon_actors.lifecycle.burst_gc import BURST_GEN2_THRESHOLD, BURST_MAX_WAKES, BURST_QUIET, BurstCollections
from orkeon_actors.testing import wait_until

from .conftest import Env


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    found = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*found)


def test_a_burst_raises_the_oldest_threshold_until_it_has_been_quiet(thresholds: tuple[int, int, int]) -> None:
    bursts = BurstCollections()
    assert bursts.woke(64, 10.0)  # the caller arms the quiet check
    assert gc.get_threshold() == (700, 10, BURST_GEN2_THRESHOLD)
    assert not bursts.woke(64, 10.5)  # a check is pending already
    assert bursts.check(11.0) == 10.5 + BURST_QUIET  # a batch came since: not over yet
    assert gc.get_threshold() == (700, 10, BURST_GEN2_THRESHOLD)
    assert bursts.check(10.5 + BURST_QUIET) is None
    assert gc.get_threshold() == thresholds and burst_gc.holders() == 0


def test_a_burst_ends_after_its_bound_and_the_next_waits_for_a_full_collection(
    thresholds: tuple[int, int, int],
) -> None:
    bursts = BurstCollections()
    bursts.woke(BURST_MAX_WAKES - 1, 1.0)
    assert gc.get_threshold()[2] == BURST_GEN2_THRESHOLD
    bursts.woke(1, 1.1)  # the bound: garbage held back by at most that many crews
    assert gc.get_threshold() == thresholds
    assert not bursts.woke(64, 1.2) and gc.get_threshold() == thresholds  # no full collection ran yet
    gc.collect()
    bursts.woke(64, 1.3)
    assert gc.get_threshold()[2] == BURST_GEN2_THRESHOLD
    bursts.end()
    assert gc.get_threshold() == thresholds


def test_two_bursts_share_the_setting_and_a_changed_one_is_left_alone(thresholds: tuple[int, int, int]) -> None:
    first, second = BurstCollections(), BurstCollections()
    first.woke(64, 1.0)
    second.woke(64, 1.0)
    first.end()
    assert gc.get_threshold()[2] == BURST_GEN2_THRESHOLD  # the second burst still runs
    second.end()
    assert gc.get_threshold() == thresholds
    first.woke(64, 2.0)
    gc.set_threshold(1000, 20, 30)  # the application's own setting, made during the burst
    first.end()
    assert gc.get_threshold() == (1000, 20, 30)


def test_a_disabled_policy_leaves_the_thresholds_alone(thresholds: tuple[int, int, int]) -> None:
    bursts = BurstCollections(enabled=False)
    assert not bursts.woke(64, 1.0)
    assert gc.get_threshold() == thresholds


def test_a_supervisor_burst_of_expiries_puts_the_thresholds_back_once_quiet(
    env: Env, thresholds: tuple[int, int, int]
) -> None:
    finite = bench.capture_template(str(env.db.parent / "finite.db"), bench.FINITE_NAME)
    crews = [f"e{i}" for i in range(3)]
    bench.populate(str(env.db), finite, crews, expires_at=env.clock.now())
    env.factories.update(bench.FACTORIES)
    sup = env.boot()
    for crew in crews:
        assert env.settle(crew, CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    assert sup.stats.expiries == 3
    assert gc.get_threshold() == (700, 10, BURST_GEN2_THRESHOLD)  # the burst is not known to be over
    env.clock.advance(BURST_QUIET)
    wait_until(lambda: gc.get_threshold() == thresholds, what="the thresholds put back")
