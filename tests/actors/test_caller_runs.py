"""What is particular to CallerRunsActor: turns run on the threads that tell it
(orkeon_actors.actors.caller_runs; the common guarantees are in test_actor_contract.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from orkeon_actors.actors import CallerRunsActor, deferred_turns, never_run_turns_here
from orkeon_actors.testing import wait_until

from .conftest import Recording


class _Recorder(Recording, CallerRunsActor):
    """Records what it receives and on which thread; counts how many threads run it at once."""


def _actor_class(**body: Any) -> type[CallerRunsActor]:
    return type("TestActor", (CallerRunsActor,), body)


def test_on_start_and_a_tell_to_an_idle_actor_run_on_the_callers_thread() -> None:
    ref = _Recorder.start()
    try:
        me = threading.get_ident()
        assert ref.ask("started_on", timeout=10) == me
        ref.tell("one")
        # Handled before tell returned, by this thread: no hand-off.
        assert ref.proxy().seen.get(timeout=10) == ["one"]
        assert ref.ask("threads", timeout=10) == [me]
    finally:
        ref.stop()


class _Busy:
    """A caller-runs actor kept busy by a runner thread (inside a ``"hold"`` message,
    until ``release``); records the thread that handled each other message."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.handled: list[tuple[Any, threading.Thread]] = []
        """(message, thread): the thread object, not its ident (idents are reused)."""

        def on_receive(actor: CallerRunsActor, message: Any) -> Any:
            if message == "hold":
                self.inside.set()
                self.release.wait(10)
                return None
            self.handled.append((message, threading.current_thread()))
            return message

        self.ref = _actor_class(on_receive=on_receive).start()
        self.runner = threading.Thread(target=self.ref.tell, args=("hold",))

    def __enter__(self) -> _Busy:
        self.runner.start()
        assert self.inside.wait(10)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release.set()
        self.runner.join(10)
        self.ref.stop()


def test_a_tell_or_ask_to_a_busy_actor_is_handled_by_the_thread_running_it() -> None:
    with _Busy() as busy:
        busy.ref.tell("queued")  # the actor is busy: this only queues it
        answer = busy.ref.ask("answer", block=False)  # answered by the runner, not by this thread
        assert busy.handled == []
        busy.release.set()
        assert answer.get(timeout=10) == "answer"
        busy.runner.join(10)
        assert busy.handled == [("queued", busy.runner), ("answer", busy.runner)]


def test_deferred_turns_run_after_the_lock_the_block_released() -> None:
    guard = threading.Lock()
    got_lock: list[bool] = []

    def on_receive(self: CallerRunsActor, message: Any) -> Any:
        # The actor's code takes the lock its caller held when it told it.
        acquired = guard.acquire(timeout=5)
        got_lock.append(acquired)
        if acquired:
            guard.release()
        return None

    ref = _actor_class(on_receive=on_receive).start()
    try:
        with deferred_turns(), guard:
            ref.tell("first")
            ref.tell("second")
            assert got_lock == []  # owed, not run: the lock is still held
        assert got_lock == [True, True]
    finally:
        ref.stop()


def test_deferred_turns_run_when_the_block_raises() -> None:
    ref = _Recorder.start()
    try:
        with pytest.raises(KeyError), deferred_turns():
            ref.tell("told before the error")
            raise KeyError("boom")
        assert ref.ask("seen", timeout=10) == ["told before the error"]
    finally:
        ref.stop()


class _Boom(BaseException):
    """An interpreter-level error escaping a turn (a turn handles every ``Exception``)."""


class _Exploding(CallerRunsActor):
    explode = False

    def _run_turns(self) -> None:
        if type(self).explode:
            raise _Boom("boom")
        super()._run_turns()


def test_every_owed_turn_runs_even_past_one_that_raised() -> None:
    bad = type("Bad", (_Exploding,), {}).start()
    good = _Recorder.start()
    try:
        bad.actor_class.explode = True  # type: ignore[attr-defined]
        with pytest.raises(_Boom), deferred_turns():
            bad.tell("first owed, raises")
            good.tell("second owed")
        assert good.ask("seen", timeout=10) == ["second owed"]
    finally:
        bad.actor_class.explode = False  # type: ignore[attr-defined]
        actor = bad._actor_weakref()  # its turn never ran: drain it, then stop it
        assert actor is not None
        actor._run_turns()
        bad.stop()
        good.stop()


def test_a_message_told_from_the_actors_own_turn_runs_after_it() -> None:
    seen: list[str] = []

    def on_receive(self: CallerRunsActor, message: Any) -> Any:
        seen.append(f"start {message}")
        if message == "outer":
            self.actor_ref.tell("inner")  # the actor is running: queued, not nested
        seen.append(f"end {message}")
        return None

    ref = _actor_class(on_receive=on_receive).start()
    try:
        ref.tell("outer")
        assert seen == ["start outer", "end outer", "start inner", "end inner"]
    finally:
        ref.stop()


def test_a_backlog_past_one_pass_is_left_to_the_pool_not_to_the_caller() -> None:
    with _Busy() as busy:
        for n in range(200):  # queued behind "hold": the runner's pass takes at most a turn's worth
            busy.ref.tell(n)
        busy.release.set()
        busy.runner.join(10)
        wait_until(lambda: len(busy.handled) == 200, what="the whole backlog handled")
        assert [n for n, _ in busy.handled] == list(range(200))
        by_runner = [n for n, thread in busy.handled if thread is busy.runner]
        assert len(by_runner) < CallerRunsActor.throughput and by_runner == list(range(len(by_runner)))


def test_a_thread_that_never_runs_turns_hands_them_to_the_pool() -> None:
    ref = _Recorder.start()
    told_from: list[int] = []

    def tell_from_a_marked_thread() -> None:
        never_run_turns_here()
        told_from.append(threading.get_ident())
        ref.tell("from the writer, say")

    try:
        thread = threading.Thread(target=tell_from_a_marked_thread)
        thread.start()
        thread.join(10)
        wait_until(lambda: ref.ask("seen", timeout=10) == ["from the writer, say"], what="handled")
        assert ref.ask("threads", timeout=10) != told_from
    finally:
        ref.stop()


def test_an_interpreter_level_error_in_a_turn_reaches_the_caller_and_stops_only_that_actor() -> None:
    def on_receive(self: CallerRunsActor, message: Any) -> Any:
        if message == "interrupt":
            raise _Boom("as KeyboardInterrupt would")
        return message

    failing = _actor_class(on_receive=on_receive).start()
    other = _Recorder.start()
    try:
        with pytest.raises(_Boom):
            failing.tell("interrupt")
        assert not failing.is_alive()
        assert other.is_alive() and other.ask("seen", timeout=10) == []
    finally:
        other.stop()
