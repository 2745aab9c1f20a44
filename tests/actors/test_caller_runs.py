"""CallerRunsActor keeps pykka's actor guarantees while running on its callers' threads
(orkeon_actors.actors.caller_runs)."""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import pykka
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.actors import CallerRunsActor, deferred_turns
from orkeon_actors.testing import wait_until

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("test_caller_runs_var", default="unset")


class _Recorder(CallerRunsActor):
    """Records what it receives and on which thread; counts how many threads run it at once."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self.threads: list[int] = []
        self.started_on: int | None = None
        self.running = 0
        self.max_running = 0
        self.lock = threading.Lock()

    def on_start(self) -> None:
        self.started_on = threading.get_ident()

    def on_receive(self, message: Any) -> Any:
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            if message == "started_on":
                return self.started_on
            if message == "seen":
                return list(self.seen)
            if message == "threads":
                return list(self.threads)
            if message == "max_running":
                return self.max_running
            self.seen.append(message)
            self.threads.append(threading.get_ident())
            return None
        finally:
            with self.lock:
                self.running -= 1


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


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=4))
def test_each_senders_messages_arrive_in_order_none_lost_none_twice(counts: list[int]) -> None:
    ref = _Recorder.start()
    try:

        def send(sender: int, count: int) -> None:
            for i in range(count):
                ref.tell((sender, i))

        threads = [threading.Thread(target=send, args=(s, c)) for s, c in enumerate(counts)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seen = ref.ask("seen", timeout=10)
        assert sorted(seen) == sorted((s, i) for s, c in enumerate(counts) for i in range(c))
        for sender, count in enumerate(counts):
            assert [i for s, i in seen if s == sender] == list(range(count))
        assert ref.ask("max_running", timeout=10) == 1
    finally:
        ref.stop()


def test_a_tell_to_a_busy_actor_is_handled_by_the_thread_running_it() -> None:
    inside = threading.Event()
    release = threading.Event()
    handled_on: dict[str, int] = {}

    def on_receive(self: CallerRunsActor, message: Any) -> Any:
        handled_on[message] = threading.get_ident()
        if message == "hold":
            inside.set()
            release.wait(10)
        return None

    ref = _actor_class(on_receive=on_receive).start()
    runner = threading.Thread(target=ref.tell, args=("hold",))
    runner.start()
    try:
        assert inside.wait(10)
        ref.tell("queued")  # the actor is busy: this only queues it
        assert "queued" not in handled_on
        release.set()
        runner.join(10)
        assert handled_on["queued"] == handled_on["hold"] == runner.ident
    finally:
        release.set()
        ref.stop()


def test_an_ask_waits_for_the_thread_running_the_actor() -> None:
    inside = threading.Event()
    release = threading.Event()

    def on_receive(self: CallerRunsActor, message: Any) -> Any:
        if message == "hold":
            inside.set()
            release.wait(10)
        return message

    ref = _actor_class(on_receive=on_receive).start()
    runner = threading.Thread(target=ref.tell, args=("hold",))
    runner.start()
    try:
        assert inside.wait(10)
        future = ref.ask("answer", block=False)
        release.set()
        assert future.get(timeout=10) == "answer"
    finally:
        release.set()
        runner.join(10)
        ref.stop()


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


def test_an_ask_that_raises_fails_the_askers_future_and_the_actor_goes_on() -> None:
    def on_receive(self: CallerRunsActor, message: Any) -> Any:
        if message == "boom":
            raise ValueError("boom")
        return message

    ref = _actor_class(on_receive=on_receive).start()
    try:
        with pytest.raises(ValueError, match="boom"):
            ref.ask("boom", timeout=10)
        assert ref.ask("still here", timeout=10) == "still here"
    finally:
        ref.stop()


def test_a_told_message_that_raises_calls_on_failure_and_stops_the_actor() -> None:
    failed = threading.Event()

    def on_receive(self: CallerRunsActor, message: Any) -> Any:
        raise RuntimeError("boom")

    def on_failure(self: CallerRunsActor, *exc_info: Any) -> None:
        failed.set()

    ref = _actor_class(on_receive=on_receive, on_failure=on_failure).start()
    ref.tell("boom")
    assert failed.is_set()
    wait_until(lambda: not ref.is_alive(), what="the failed actor to stop")
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("after")


def test_each_actor_keeps_its_own_context_variables() -> None:
    def on_receive(self: CallerRunsActor, message: Any) -> Any:
        if message == "get":
            return _VAR.get()
        _VAR.set(message)
        return None

    cls = _actor_class(on_receive=on_receive)
    first, second = cls.start(), cls.start()
    try:
        first.tell("first's value")
        for _ in range(5):
            assert first.ask("get", timeout=10) == "first's value"
            assert second.ask("get", timeout=10) == "unset"
        assert _VAR.get() == "unset"  # nor into the caller's, whose thread ran the turns
    finally:
        first.stop()
        second.stop()


def test_stopping_answers_the_stop_and_refuses_later_messages() -> None:
    ref = _Recorder.start()
    ref.tell("before")
    ref.stop(block=True, timeout=10)
    assert not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("after")
