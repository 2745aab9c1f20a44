"""The guarantees every actor kind of ``orkeon_actors.actors`` gives, as
``pykka.ThreadingActor`` does: one suite, run against each kind (pooled, caller-runs) and
against ``pykka.ThreadingActor`` itself, the reference. This is the parity test behind
the ``pykka`` pin's upper bound in ``pyproject.toml``: ``PooledActor`` implements pykka's
hooks for new actor types, which pykka may change in a minor release."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orkeon_actors.actors import ActorThreadPool, CallerRunsActor, PooledActor
from orkeon_actors.testing import wait_until

from .conftest import Recording, assert_each_senders_messages_in_order_once

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("test_actor_contract_var", default="unset")

MakeClass = Callable[..., type[pykka.Actor]]
"""``make(*mixins, **body)``: an actor class of the kind under test."""


@pytest.fixture(params=["pooled", "caller_runs", "pykka_threading"])
def make(request: pytest.FixtureRequest) -> Iterator[MakeClass]:
    if request.param == "pykka_threading":
        yield lambda *mixins, **body: type("TestActor", (*mixins, pykka.ThreadingActor), body)
        return
    if request.param == "caller_runs":
        yield lambda *mixins, **body: type("TestActor", (*mixins, CallerRunsActor), body)
        return
    pool = ActorThreadPool(keep_alive=30.0, name="contract-pool")
    yield lambda *mixins, **body: type("TestActor", (*mixins, PooledActor), {"pool": pool, **body})
    pool.trim()


def test_on_start_runs_before_the_first_message(make: MakeClass) -> None:
    ref = make(Recording).start()
    try:
        assert ref.ask("started?", timeout=10) is True
    finally:
        ref.stop()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=4))
def test_each_senders_messages_arrive_in_order_none_lost_none_twice(make: MakeClass, counts: list[int]) -> None:
    ref = make(Recording).start()
    try:
        assert_each_senders_messages_in_order_once(ref, counts)
    finally:
        ref.stop()


def test_an_ask_that_raises_fails_the_askers_future_and_the_actor_goes_on(make: MakeClass) -> None:
    def on_receive(self: pykka.Actor, message: Any) -> Any:
        if message == "boom":
            raise ValueError("boom")
        return message

    ref = make(on_receive=on_receive).start()
    try:
        with pytest.raises(ValueError, match="boom"):
            ref.ask("boom", timeout=10)
        assert ref.ask("still here", timeout=10) == "still here"
    finally:
        ref.stop()


def test_a_told_message_that_raises_calls_on_failure_and_stops_the_actor(make: MakeClass) -> None:
    failed = threading.Event()

    def on_receive(self: pykka.Actor, message: Any) -> Any:
        raise RuntimeError("boom")

    def on_failure(self: pykka.Actor, *exc_info: Any) -> None:
        failed.set()

    ref = make(on_receive=on_receive, on_failure=on_failure).start()
    ref.tell("boom")
    assert failed.wait(10)
    wait_until(lambda: not ref.is_alive(), what="the failed actor to stop")
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("after")


def test_each_actor_keeps_its_own_context_variables_across_turns(make: MakeClass) -> None:
    def on_receive(self: pykka.Actor, message: Any) -> Any:
        if message == "get":
            return _VAR.get()
        _VAR.set(message)
        return None

    cls = make(on_receive=on_receive)
    first, second = cls.start(), cls.start()
    try:
        first.ask("first's value", timeout=10)
        for _ in range(20):  # many turns, on whichever thread runs them
            assert first.ask("get", timeout=10) == "first's value"
            assert second.ask("get", timeout=10) == "unset"
        assert _VAR.get() == "unset"  # nor in the caller's context (a caller-runs actor ran on this thread)
    finally:
        first.stop()
        second.stop()


def test_stopping_answers_the_stop_and_refuses_later_messages(make: MakeClass) -> None:
    ref = make(Recording).start()
    ref.tell("before")
    assert ref.ask("seen", timeout=10) == ["before"]
    ref.stop(block=True, timeout=10)
    assert not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("after")


def test_the_installed_pykka_has_every_hook_the_pooled_actor_uses() -> None:
    import importlib.metadata

    from orkeon_actors.actors.pooled import PYKKA_HOOKS

    missing = [name for name in PYKKA_HOOKS if not callable(getattr(pykka.Actor, name, None))]
    version = importlib.metadata.version("pykka")
    assert not missing, f"pykka {version} lacks {missing}: PooledActor must follow pykka's change"


def test_a_thread_waiting_on_actor_stopped_is_released_by_the_stop(make: MakeClass) -> None:
    ref = make(Recording).start()
    assert ref.is_alive()
    assert not ref.actor_stopped.wait(0.01)  # alive: the wait times out, it does not block for good
    released = threading.Event()

    def waiter() -> None:
        if ref.actor_stopped.wait(30):
            released.set()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    ref.stop(block=True, timeout=10)
    assert released.wait(10), "a thread waiting on actor_stopped was not released by the stop"
    thread.join(10)
    assert ref.actor_stopped.is_set() and ref.actor_stopped.wait(0)
    assert not ref.is_alive()


def test_pooled_actors_set_the_fields_pykka_actor_init_sets() -> None:
    # PooledActor replaces pykka.Actor.__init__ (a StopFlag for actor_stopped): a field
    # a new pykka release adds there must be added to it too.
    class Plain(pykka.ThreadingActor):  # pykka.Actor.__init__, not started
        pass

    class Pooled(PooledActor):
        pass

    plain, pooled = Plain(), Pooled()
    assert set(vars(plain)) <= set(vars(pooled))
    assert pooled.actor_ref.actor_stopped is pooled.actor_stopped
    assert pooled.actor_urn.startswith("urn:uuid:") and pooled.actor_urn != Pooled().actor_urn
