"""Spec §7.1 idle detection and the cap; §7.3 lazy boot (in-process restart)."""

from __future__ import annotations

from orkeon_actors.crew import CrewStatus, call, respond
from orkeon_actors.lifecycle import LifecycleState

from .conftest import Env
from .test_sleep_wake import _crew, _result


def test_an_idle_waiting_crew_sleeps_after_its_idle_timeout(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot(idle_timeout=300)
    sup.spawn("c", "c1")
    env.settle("c1")
    env.clock.advance(299)
    assert sup.state("c1") is LifecycleState.ACTIVE
    env.clock.advance(2)
    env.asleep("c1")
    env.hub.bind("o").post("agent://c1/a", "wake")
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED


def test_the_cap_puts_the_least_recently_used_waiting_crew_to_sleep(env: Env) -> None:
    env.factories["c"] = lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("done"))
    sup = env.boot(max_active=1)
    sup.spawn("c", "c1")
    env.settle("c1")
    env.clock.advance(1)
    sup.spawn("c", "c2")
    env.asleep("c1")
    assert sup.state("c2") is LifecycleState.ACTIVE


def test_lazy_boot_wakes_nothing_but_a_past_expiry(env: Env) -> None:
    env.factories["f"] = lambda _: _crew(call("wait_for_event", {"topic": "x", "timeout_ms": 60_000}), respond("t"))
    env.factories["n"] = lambda _: _crew(call("wait_for_event", {"topic": "y", "wait_forever": True}), respond("m"))
    sup = env.boot()
    sup.spawn("f", "finite")
    sup.spawn("n", "forever")
    env.settle("finite")
    env.settle("forever")
    assert sup.sleep("finite") and sup.sleep("forever")
    env.shutdown()
    env.clock.advance(3600)
    sup = env.boot()
    assert sup.booted_asleep == 2
    assert env.settle("finite", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
    assert _result(env, "finite")["timed_out"] is True
    assert sup.state("forever") is LifecycleState.ASLEEP
    env.hub.bind("p").publish("y", 1)
    assert env.settle("forever", CrewStatus.COMPLETED) is CrewStatus.COMPLETED
