"""Spec §7, §16.2: sleep, wake on a message / an expiry, zero actors while asleep."""

from __future__ import annotations

import json
import threading

import pykka
import pytest

from orkeon_actors.actors import DEFAULT_POOL
from orkeon_actors.crew import Agent, CrewActor, CrewStatus, ScriptedModel, call, respond
from orkeon_actors.errors import InvalidArgumentError, MailboxNotFoundError
from orkeon_actors.hub.mailbox import MailboxActor
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.store import faults
from orkeon_actors.testing import wait_until

from .conftest import Env


def _crew(*script: object) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(list(script)))  # type: ignore[arg-type]
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


def _result(env: Env, crew: str) -> dict[str, object]:

    snap = env.snapshot(crew)
    data: dict[str, object] = json.loads(snap.agents[0].conversation[-2].content)
    return data


def _live_actors() -> int:
    """Crew and mailbox actors alive."""
    return sum(1 for cls in (CrewActor, MailboxActor) for r in pykka.ActorRegistry.get_by_class(cls) if r.is_alive())


def _threads_without_idle_pool() -> int:
    """Threads alive once the actor pool's idle threads are ended: crews and mailboxes
    hold a pool thread only while they handle a message."""
    DEFAULT_POOL.trim()
    return threading.active_count()


def _assert_no_thread_beyond(baseline: int) -> None:
    wait_until(lambda: DEFAULT_POOL.busy == 0, what="no crew or mailbox handling a message")
    assert _threads_without_idle_pool() == baseline


def test_sleep_releases_every_actor_and_a_post_wakes_it(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot()
    baseline = _threads_without_idle_pool()
    sup.spawn("c", "c1")
    assert env.settle("c1") is CrewStatus.WAITING
    assert _live_actors() == 1  # the crew: its idle mailboxes (waiters only) have no actor yet
    assert sup.sleep("c1") is True
    assert sup.state("c1") is LifecycleState.ASLEEP
    wait_until(lambda: _live_actors() == 0, what="no actor of c1")
    _assert_no_thread_beyond(baseline)
    [wait] = env.hub.load_pending_waits("c1")
    assert wait.expires_at is None and str(wait.target_mailbox) == "agent://c1/a"
    env.hub.bind("other", "x").post("agent://c1/a", {"hello": 1})
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    result = _result(env, "c1")
    assert result["timed_out"] is False and result["message"]["payload"] == {"hello": 1}  # type: ignore[index]
    assert sup.stats.wakes == 1 and sup.stats.sleeps == 1


def test_a_finished_crew_releases_its_actors_and_threads_at_once_and_keeps_its_outcome(env: Env) -> None:
    """A woken crew that finishes holds nothing once its outcome is durable: its actor and
    its two mailboxes go without waiting for stop(), posts to it are refused (nothing
    would consume them), and its outcome (result, final state) stays with the supervisor."""
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot()
    sup.spawn("c", "c1")
    assert env.settle("c1") is CrewStatus.WAITING
    assert sup.sleep("c1") is True
    wait_until(lambda: _live_actors() == 0, what="no actor of c1")
    baseline = _threads_without_idle_pool()
    poster = env.hub.bind("other", "x")
    poster.post("agent://c1/a", {"hello": 1})
    wait_until(lambda: sup.outcome("c1") is not None, what="c1's outcome")
    assert _live_actors() == 0 and sup.ref("c1") is None
    _assert_no_thread_beyond(baseline)
    assert not {"crew://c1", "agent://c1/a"} & {str(a) for a in env.hub.durable_mailboxes}
    with pytest.raises(MailboxNotFoundError):
        poster.post("agent://c1/a", {"late": 1})
    outcome = sup.outcome("c1")
    assert outcome is not None and outcome.status is CrewStatus.COMPLETED and outcome.result == "done"
    assert _result(env, "c1")["message"]["payload"] == {"hello": 1}  # type: ignore[index]
    assert sup.state("c1") is LifecycleState.COMPLETED and sup.status("c1") is CrewStatus.COMPLETED


def test_the_supervisor_remembers_the_outcomes_of_the_last_finished_memory_crews(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(respond("done"))
    sup = env.boot(finished_memory=2)
    for crew in ("c1", "c2", "c3"):
        sup.spawn("c", crew)
        wait_until(lambda c=crew: sup.outcome(c) is not None, what=f"{crew}'s outcome")  # type: ignore[misc]
    assert "c1" not in sup._call(lambda actor: dict(actor.outcomes))  # forgotten in memory: the oldest of three
    kept = sup.outcome("c1")  # read back from the store's crew_outcomes instead
    assert kept is not None and kept.result == "done"
    assert sup.state("c1") is LifecycleState.COMPLETED
    assert env.hub.load_snapshot("c1") is None  # a completed crew's snapshot is deleted at once
    for crew in ("c2", "c3"):
        outcome = sup.outcome(crew)
        assert outcome is not None and outcome.result == "done"
        final = outcome.final_snapshot()
        assert final is not None and final.id == crew and final.status == "completed"
    assert _live_actors() == 0


def test_with_no_finished_memory_only_the_durable_outcome_is_kept_without_its_final_state(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(respond("done"))
    sup = env.boot(finished_memory=0)
    sup.spawn("c", "c1")
    # Released: no actor, and the supervisor forgot it (its status no longer reported).
    wait_until(lambda: _live_actors() == 0 and sup.status("c1") is None, what="c1 finished and forgotten")
    assert "c1" not in sup._call(lambda actor: dict(actor.outcomes))
    outcome = sup.wait_finished("c1", timeout=30)  # from the store's crew_outcomes
    assert outcome.result == "done" and outcome.final_snapshot() is None
    assert sup.state("c1") is LifecycleState.COMPLETED


def test_a_finished_crews_id_spawned_again_reports_the_new_crew_not_the_old_outcome(env: Env) -> None:
    env.factories["once"] = lambda _: _crew(respond("first"))
    env.factories["waits"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("second"))
    sup = env.boot()
    sup.spawn("once", "c1")
    wait_until(lambda: sup.outcome("c1") is not None, what="the first c1 finished")
    sup.spawn("waits", "c1")  # completed crews are deleted: the id is free again
    assert env.settle("c1") is CrewStatus.WAITING
    assert sup.outcome("c1") is None and sup.state("c1") is LifecycleState.ACTIVE
    env.hub.bind("other", "x").post("agent://c1/a", {"go": 1})
    wait_until(lambda: sup.outcome("c1") is not None, what="the second c1 finished")
    outcome = sup.outcome("c1")
    assert outcome is not None and outcome.result == "second"


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_finished_memory_must_be_a_count_of_crews(env: Env, bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="finished_memory must be a number of crews"):
        env.boot(finished_memory=bad)


def test_topic_message_wakes_a_sleeping_crew_and_is_its_tool_result(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(
        call("wait_for_event", {"topic": "orders.*", "wait_forever": True, "metadata_match": {"k": "v"}}),
        respond("done"),
    )
    sup = env.boot()
    sup.spawn("c", "c1")
    env.settle("c1")
    assert sup.sleep("c1")
    client = env.hub.bind("pub")
    client.publish("orders.new", {"n": 0}, options=None)  # metadata does not match: stays asleep
    client.publish("other.new", {"n": 1})
    assert sup.state("c1") is LifecycleState.ASLEEP
    import orkeon_actors as ok

    client.publish("orders.new", {"n": 2}, options=ok.PublishOptions(metadata={"k": "v"}))
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    assert _result(env, "c1")["message"]["payload"] == {"n": 2}  # type: ignore[index]


def test_finite_wait_expiry_wakes_the_crew_with_the_timeout_message(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("wait_for_event", {"topic": "x.*", "timeout_ms": 60_000}), respond("t"))
    sup = env.boot()
    sup.spawn("c", "c1")
    env.settle("c1")
    assert sup.sleep("c1")
    env.clock.advance(59)
    assert sup.state("c1") is LifecycleState.ASLEEP
    env.clock.advance(2)
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    result = _result(env, "c1")
    assert result["timed_out"] is True and result["metadata"]["original_topic"] == "x.*"  # type: ignore[index]
    assert sup.stats.expiries == 1


def test_forever_wait_never_enters_the_scheduler(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("wait_for_event", {"topic": "x.*", "wait_forever": True}), respond("m"))
    sup = env.boot()
    sup.spawn("c", "c1")
    env.settle("c1")
    assert sup.sleep("c1")
    env.clock.advance(10 * 365 * 86400)
    assert sup.state("c1") is LifecycleState.ASLEEP and sup.stats.expiries == 0
    env.hub.bind("p").publish("x.y", 1)
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED


def test_a_failed_snapshot_write_keeps_the_crew_active(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot()
    sup.spawn("c", "c1")
    env.settle("c1")

    def boom(point: str) -> None:
        if point == "lifecycle.save":
            raise OSError("disk full (injected)")

    faults.install(boom)
    try:
        assert sup.sleep("c1") is False
    finally:
        faults.uninstall()
    assert sup.state("c1") is LifecycleState.ACTIVE
    assert env.hub.load_snapshot("c1") is None and sup.stats.sleep_failures == 1
    env.hub.bind("o").post("agent://c1/a", "still here")  # its re-armed wait takes it
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    assert sup.sleep("c1") is False  # a completed crew does not sleep


def test_a_busy_crew_refuses_to_sleep(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(respond("done"))
    sup = env.boot()
    sup.spawn("c", "c1")
    env.settle("c1", CrewStatus.COMPLETED)
    assert sup.sleep("c1") is False
    wait_until(lambda: env.hub.load_snapshot("c1") is None, what="completed crew deleted")


def test_a_blueprint_registered_itself_is_shared_by_every_crew_of_its_name(env: Env) -> None:
    """A ``CrewBlueprint`` registered in place of a factory builds every crew of that
    name, at spawn and at each wake (no factory call): crews sharing it keep their own
    state (conversations, mailboxes) and each completes with its own message."""
    blueprint = _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot()
    sup.register_factory("shared", blueprint)
    for crew in ("c1", "c2"):
        sup.spawn("shared", crew)
        assert env.settle(crew) is CrewStatus.WAITING
        assert sup.sleep(crew) is True
    poster = env.hub.bind("other", "x")
    for crew in ("c2", "c1"):
        poster.post(f"agent://{crew}/a", {"to": crew})
        assert env.settle(crew, CrewStatus.COMPLETED) is CrewStatus.COMPLETED
        assert _result(env, crew)["message"]["payload"] == {"to": crew}  # type: ignore[index]


def test_a_pipelined_burst_of_posts_wakes_every_sleeping_crew_once(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot()
    crews = [f"c{i}" for i in range(5)]
    for crew in crews:
        sup.spawn("c", crew)
        assert env.settle(crew) is CrewStatus.WAITING
        assert sup.sleep(crew) is True
    env.hub.bind("other", "x").post_many([(f"agent://{crew}/a", {"to": crew}) for crew in crews])
    for crew in crews:
        assert env.settle(crew, CrewStatus.COMPLETED) is CrewStatus.COMPLETED
        assert _result(env, crew)["message"]["payload"] == {"to": crew}  # type: ignore[index]
    assert sup.stats.wakes == 5
