"""The executor seam: where pooled and caller-runs actors submit their turns, and the
seeded single-threaded scheduler a simulation puts there."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pykka
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.actors import CallerRunsActor, PooledActor
from orkeon_actors.actors.executor import current_executor, executor_scope
from orkeon_actors.hub.scheduler import Scheduler
from orkeon_actors.model.clock import VirtualClock
from orkeon_actors.sim.scheduler import DeterministicScheduler, DrivenFuture, SimulationStuckError


class Recorder(PooledActor):
    def __init__(self, log: list[Any]) -> None:
        super().__init__()
        self.log = log

    def on_receive(self, message: Any) -> Any:
        self.log.append((message, threading.current_thread()))
        return message


class Relay(CallerRunsActor):
    """Forwards ``(n, target)`` to ``target`` as ``(name, n)``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def on_receive(self, message: Any) -> Any:
        n, target = message
        target.tell((self.name, n))
        return None


def test_an_actor_started_in_a_scope_submits_every_turn_to_that_executor() -> None:
    scheduler = DeterministicScheduler(0)
    log: list[Any] = []
    with executor_scope(scheduler):
        assert current_executor() is scheduler
        ref = Recorder.start(log)
    assert current_executor() is None
    ref.tell("a")  # told outside the scope: still its executor's turn
    assert log == [] and scheduler.ready == 1
    assert scheduler.run_ready() == 1
    assert log == [("a", threading.current_thread())]
    with executor_scope(scheduler):
        future = ref.ask("b", block=False)
        assert isinstance(future, DrivenFuture)
        assert future.get() == "b"  # runs the turn that answers it
        ref.stop()


def test_outside_a_scope_actors_run_on_their_pool() -> None:
    log: list[Any] = []
    ref = Recorder.start(log)
    try:
        assert ref.ask("x", timeout=5) == "x"
        assert log[0][1] is not threading.current_thread()
    finally:
        ref.stop()


def test_a_caller_runs_actor_submits_its_turn_when_its_executor_does_not_let_callers_run() -> None:
    scheduler = DeterministicScheduler(0)
    log: list[Any] = []
    with executor_scope(scheduler):
        sink = Recorder.start(log)
        relay = Relay.start("r")
        scheduler.run_ready()
        relay.tell((1, sink))
        assert log == []  # not run inside the tell
        scheduler.run_ready()
        assert [m for m, _ in log] == [("r", 1)]
        relay.stop()
        sink.stop()


def test_an_ask_nothing_can_answer_fails_at_once_instead_of_hanging() -> None:
    scheduler = DeterministicScheduler(0)
    with executor_scope(scheduler):
        future = scheduler.create_future()
        with pytest.raises(SimulationStuckError, match="can never be answered"):
            future.get(timeout=30)


def test_timers_made_in_a_scope_on_a_virtual_clock_are_tasks_of_the_executor() -> None:
    scheduler = DeterministicScheduler(0)
    clock = VirtualClock()
    fired: list[tuple[str, threading.Thread]] = []
    with executor_scope(scheduler):
        timers = Scheduler(clock)
    before = set(threading.enumerate())
    timers.schedule_in(2, lambda: fired.append(("b", threading.current_thread())))
    timers.schedule_in(1, lambda: fired.append(("a", threading.current_thread())))
    clock.advance(1)
    assert fired == [] and scheduler.ready == 1  # due, submitted, not run
    scheduler.run_ready()
    clock.advance(1)
    scheduler.run_ready()
    assert fired == [("a", threading.current_thread()), ("b", threading.current_thread())]
    assert timers.next_deadline() is None and set(threading.enumerate()) == before
    timers.stop()


def _fan_in(seed: int, senders: int, per_sender: int) -> list[tuple[str, int]]:
    scheduler = DeterministicScheduler(seed)
    log: list[Any] = []
    with executor_scope(scheduler):
        sink = Recorder.start(log)
        relays = [Relay.start(f"s{i}") for i in range(senders)]
        for n in range(per_sender):
            for relay in relays:
                relay.tell((n, sink))
        scheduler.run_ready()
        for ref in [*relays, sink]:
            ref.stop()
    return [m for m, _ in log]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), senders=st.integers(1, 5), per_sender=st.integers(1, 6))
def test_any_seed_keeps_each_senders_order_loses_nothing_and_replays(seed: int, senders: int, per_sender: int) -> None:
    got = _fan_in(seed, senders, per_sender)
    assert sorted(got) == sorted((f"s{i}", n) for i in range(senders) for n in range(per_sender))
    for i in range(senders):
        assert [n for name, n in got if name == f"s{i}"] == list(range(per_sender))
    assert _fan_in(seed, senders, per_sender) == got


def test_seeds_choose_different_orders_across_senders() -> None:
    assert len({tuple(_fan_in(seed, 3, 3)) for seed in range(30)}) > 1


def test_the_scheduler_runs_submitted_tasks_only_when_stepped() -> None:
    scheduler = DeterministicScheduler(1)
    ran: list[int] = []
    tasks: list[Callable[[], None]] = [lambda i=i: ran.append(i) for i in range(5)]
    for task in tasks:
        scheduler.submit(task)
    assert ran == [] and scheduler.ready == 5
    assert scheduler.step() and len(ran) == 1
    assert scheduler.run_ready() == 4 and sorted(ran) == [0, 1, 2, 3, 4]
    assert not scheduler.step() and scheduler.steps == 5


def test_stop_of_an_actor_in_a_scope_is_answered_through_the_scheduler() -> None:
    scheduler = DeterministicScheduler(0)
    with executor_scope(scheduler):
        ref = Recorder.start([])
        assert ref.stop() is True
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("late")
