"""Outcomes of finished crews: wait_finished / when_finished, kept across a restart for
their retention, failed crews kept for audit (spec §11.4)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from orkeon_actors.crew import Agent, CrewOutcome, CrewStatus, ScriptedModel, call, respond
from orkeon_actors.errors import CrewFailedError, CrewNotFoundError, CrewWaitTimeoutError
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.store import PurgePolicy, StoreConfig

from .conftest import Env


def _crew(*script: object) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(list(script)))  # type: ignore[arg-type]
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


def test_wait_finished_returns_the_outcome_of_a_completed_crew(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot()
    sup.spawn("c", "c1")
    env.settle("c1", CrewStatus.WAITING)
    with pytest.raises(CrewWaitTimeoutError) as caught:
        sup.wait_finished("c1", timeout=0.05)
    assert "did not finish" in str(caught.value) and isinstance(caught.value, TimeoutError)
    env.hub.bind("other", "x").post("agent://c1/a", {"go": 1})
    outcome = sup.wait_finished("c1", timeout=30)
    assert outcome.status is CrewStatus.COMPLETED and outcome.result == "done"
    assert sup.wait_finished("c1", timeout=30).result == "done"  # already finished: at once


def test_wait_finished_raises_the_failure_of_a_failed_crew(env: Env) -> None:
    env.factories["c"] = lambda _: _crew()  # an empty script: the model has nothing to say
    sup = env.boot()
    sup.spawn("c", "c1")
    with pytest.raises(CrewFailedError) as caught:
        sup.wait_finished("c1", timeout=30)
    error = caught.value
    assert error.crew_id == "c1" and error.failure is not None and str(error.failure) in str(error)
    assert isinstance(error.outcome, CrewOutcome) and error.outcome.status is CrewStatus.FAILED


def test_wait_finished_on_an_unknown_crew_raises_at_once(env: Env) -> None:
    sup = env.boot()
    with pytest.raises(CrewNotFoundError):
        sup.wait_finished("nobody", timeout=30)


def test_when_finished_calls_back_once_without_blocking(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot()
    sup.spawn("c", "c1")
    env.settle("c1", CrewStatus.WAITING)
    heard: list[tuple[str, CrewOutcome]] = []
    done = threading.Event()

    def on_done(outcome: CrewOutcome) -> None:
        heard.append((threading.current_thread().name, outcome))
        done.set()

    sup.when_finished("c1", on_done)
    withdrawn: list[CrewOutcome] = []
    sup.when_finished("c1", withdrawn.append)()  # withdrawn at once: never called
    assert heard == []
    env.hub.bind("other", "x").post("agent://c1/a", {"go": 1})
    assert done.wait(30)
    [(thread, outcome)] = heard
    assert outcome.result == "done" and thread != threading.current_thread().name
    late: list[CrewOutcome] = []
    sup.when_finished("c1", late.append)  # already durable: called at once, on this thread
    assert [o.result for o in late] == ["done"] and withdrawn == []


def test_outcomes_survive_a_restart(env: Env) -> None:
    env.factories["ok"] = lambda _: _crew(respond("fine"))
    env.factories["bad"] = lambda _: _crew()
    sup = env.boot()
    sup.spawn("ok", "good")
    sup.spawn("bad", "broken")
    assert sup.wait_finished("good", timeout=30).result == "fine"
    with pytest.raises(CrewFailedError):
        sup.wait_finished("broken", timeout=30)
    sup = env.restart()
    good = sup.outcome("good")
    assert good is not None and good.status is CrewStatus.COMPLETED and good.result == "fine"
    final = good.final_snapshot()
    assert final is not None and final.id == "good"
    assert sup.state("good") is LifecycleState.COMPLETED
    assert sup.wait_finished("good", timeout=30).result == "fine"
    broken = sup.outcome("broken")
    assert broken is not None and broken.status is CrewStatus.FAILED and broken.failure is not None
    assert sup.state("broken") is LifecycleState.FAILED
    with pytest.raises(CrewFailedError):
        sup.wait_finished("broken", timeout=30)


def test_a_failed_crew_keeps_a_failed_snapshot_row_for_failed_retention(env: Env) -> None:
    env.factories["bad"] = lambda _: _crew()
    sup = env.boot()
    sup.spawn("bad", "broken")
    with pytest.raises(CrewFailedError):
        sup.wait_finished("broken", timeout=30)
    record = env.hub.load_snapshot("broken")
    assert record is not None and record.state.value == "Failed"
    assert env.hub.load_pending_waits("broken") == []
    env.clock.advance(timedelta(days=6).total_seconds())  # the hourly purge runs on the virtual clock
    env.hub.purge_now()
    assert env.hub.load_snapshot("broken") is not None and sup.outcome("broken") is not None
    env.clock.advance(timedelta(days=1, minutes=1).total_seconds())  # past failed_retention
    env.hub.purge_now()
    assert env.hub.load_snapshot("broken") is None
    sup = env.restart()
    assert sup.outcome("broken") is None and sup.state("broken") is LifecycleState.UNKNOWN
    sup.spawn("bad", "broken")  # the id can be used again once the audit row went


def test_a_completed_crews_outcome_is_purged_after_outcome_retention(env: Env) -> None:
    env.factories["ok"] = lambda _: _crew(respond("fine"))
    sup = env.boot()
    sup.spawn("ok", "good")
    sup.wait_finished("good", timeout=30)
    env.clock.advance(timedelta(days=6).total_seconds())
    env.hub.purge_now()
    assert env.restart().outcome("good") is not None
    env.clock.advance(timedelta(days=1, minutes=1).total_seconds())  # past outcome_retention
    env.hub.purge_now()
    sup = env.restart()
    assert sup.outcome("good") is None


def test_purge_policy_has_an_outcome_retention() -> None:
    assert PurgePolicy().outcome_retention == timedelta(days=7)
    assert StoreConfig("x.db", purge=PurgePolicy(outcome_retention=timedelta(hours=1))).purge.outcome_retention == (
        timedelta(hours=1)
    )


def test_a_post_to_a_finished_supervised_crew_says_it_finished(env: Env) -> None:
    from orkeon_actors.errors import MailboxNotFoundError

    env.factories["ok"] = lambda _: _crew(respond("fine"))
    sup = env.boot()
    sup.spawn("ok", "good")
    sup.wait_finished("good", timeout=30)
    with pytest.raises(MailboxNotFoundError) as caught:
        env.hub.bind("x", "y").post("agent://good/a", 1)
    assert caught.value.finished == "completed"


def test_wait_finished_takes_a_timeout_beyond_what_the_platform_can_wait(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(respond("done"))
    sup = env.boot()
    sup.spawn("c", "c1")
    assert sup.wait_finished("c1", timeout=1e10).result == "done"  # raised OverflowError before
    assert sup.wait_finished("c1", timeout=timedelta.max).result == "done"
