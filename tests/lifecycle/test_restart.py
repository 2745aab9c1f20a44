"""``CrewSupervisor.stop()`` and a restart on the same store (spec §7.2, §7.3, §16.2):
live crews are put to sleep, a crew that cannot sleep in time is parked and restored
from its last snapshot with the posts it consumed since redelivered, and posts to any
unfinished crew are accepted after the restart and wake it."""

from __future__ import annotations

import json
import threading
from typing import Any

from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

from .conftest import Env

STOP = "stop"
BLOCK = "block"


class Loop:
    """A crew looping on ``receive_message``; ``"stop"`` ends it with every payload it
    received; the model blocks on ``gate`` when it is given ``"block"``."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.seen: list[Any] = []

    def policy(self, request: ModelRequest) -> ModelResponse:
        payloads = [json.loads(m.content)["message"]["payload"] for m in request.messages if m.role == "tool"]
        self.seen = payloads
        if payloads and payloads[-1] == BLOCK:
            self.gate.wait()
        if payloads and payloads[-1] == STOP:
            return respond(json.dumps(payloads[:-1]))
        return call("receive_message", {"wait_forever": True})

    def factory(self, _crew: Any) -> CrewBlueprint:
        agent = Agent("a", ScriptedModel(policy=self.policy))
        return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("loop", agent.agent_id)]))


def _post(env: Env, crew: str, payload: Any) -> None:
    env.hub.bind("shop", "desk").post(f"agent://{crew}/a", payload)


def _handled(env: Env, loop: Loop, crew: str, count: int) -> None:
    wait_until(lambda: len(loop.seen) >= count, what=f"{count} posts handled")
    env.settle(crew, CrewStatus.WAITING)


def _finish(env: Env, crew: str) -> list[Any]:
    _post(env, crew, STOP)
    assert env.settle(crew, CrewStatus.COMPLETED, CrewStatus.FAILED) is CrewStatus.COMPLETED
    _, result, failure = env.summary(crew)
    assert failure is None
    received: list[Any] = json.loads(result)
    return received


def test_stop_puts_spawned_and_woken_crews_to_sleep_and_posts_after_the_restart_wake_them(env: Env) -> None:
    loops = {"woken": Loop(), "fresh": Loop()}
    for name, loop in loops.items():
        env.factories[name] = loop.factory
    sup = env.boot()
    for name in loops:
        sup.spawn(name, name)
        env.settle(name, CrewStatus.WAITING)
    assert sup.sleep("woken") is True
    _post(env, "woken", 0)  # wakes it: consumed while active, after its snapshot
    _post(env, "fresh", 10)  # consumed by a crew that never slept
    _handled(env, loops["woken"], "woken", 1)
    _handled(env, loops["fresh"], "fresh", 1)
    assert len(env.hub.kept_messages("agent://woken/a")) == 1  # not acknowledged yet

    sup = env.restart()
    assert sup.state("woken") is LifecycleState.ASLEEP and sup.state("fresh") is LifecycleState.ASLEEP
    assert sup.stats.wakes == 0  # the sleeps at stop acknowledged the consumed posts: no kept mail
    assert env.hub.kept_messages("agent://woken/a") == env.hub.kept_messages("agent://fresh/a") == []
    _post(env, "woken", 1)  # accepted while asleep (the registration was kept) and wakes it
    _post(env, "fresh", 11)
    assert _finish(env, "woken") == [0, 1]
    assert _finish(env, "fresh") == [10, 11]


def test_a_crew_that_cannot_sleep_before_the_stop_restarts_from_its_snapshot_and_gets_its_posts_again(
    env: Env,
) -> None:
    loop = Loop()
    env.factories["loop"] = loop.factory
    sup = env.boot()
    sup.spawn("loop", "c")
    env.settle("c", CrewStatus.WAITING)
    _post(env, "c", 0)
    _handled(env, loop, "c", 1)
    assert sup.sleep("c") is True  # its snapshot reflects post 0
    _post(env, "c", 1)
    _post(env, "c", BLOCK)  # the model blocks: the crew cannot sleep
    wait_until(lambda: loop.seen == [0, 1, BLOCK], what="model blocked")

    stopper = threading.Thread(target=lambda: sup.stop(timeout=0.2))  # asks, in vain, then parks it
    stopper.start()
    wait_until(lambda: sup._call(lambda actor: actor.entries["c"].stopping), what="the stop gave up on c")
    loop.gate.set()  # the model returns: the crew parks its mailboxes, unacknowledged
    stopper.join(timeout=30)
    assert not stopper.is_alive()
    assert env.rt is not None
    env.rt.stop()
    env.sup = env.rt = None

    sup = env.boot()  # kept mail: restored from the snapshot holding post 0, gets 1 and BLOCK again
    assert sup.stats.wakes == 1
    _handled(env, loop, "c", 3)
    assert _finish(env, "c") == [0, 1, BLOCK]


def test_a_finished_crew_releases_its_mailboxes_at_stop(env: Env) -> None:
    loop = Loop()
    env.factories["loop"] = loop.factory
    sup = env.boot()
    sup.spawn("loop", "c")
    env.settle("c", CrewStatus.WAITING)
    assert _finish(env, "c") == []
    sup = env.restart()
    assert sup.state("c") is LifecycleState.COMPLETED  # its outcome outlives the restart; its mailboxes do not
    assert "agent://c/a" not in {str(a) for a in env.hub.durable_mailboxes}


def test_stop_asks_a_crew_that_refused_again_once_it_waits_and_it_sleeps(env: Env) -> None:
    """A crew with work queued when ``stop()`` asks it refuses to sleep; ``stop()`` waits
    for its next report (not a poll) and asks again once it waits: it sleeps, its posts
    are acknowledged by that snapshot, and the next boot has nothing to redeliver."""
    loop = Loop()
    env.factories["loop"] = loop.factory
    sup = env.boot()
    sup.spawn("loop", "c")
    env.settle("c", CrewStatus.WAITING)
    _post(env, "c", BLOCK)  # the model blocks the crew's turn
    wait_until(lambda: loop.seen == [BLOCK], what="model blocked")
    _post(env, "c", 1)  # kept in the mailbox: handed to the crew once the agent parks again

    stopper = threading.Thread(target=lambda: sup.stop(timeout=30))
    stopper.start()
    wait_until(lambda: sup._call(lambda actor: actor.shutting_down), what="the stop asked c to sleep")
    loop.gate.set()  # the agent parks and gets post 1 at once: the sleep request finds work queued
    stopper.join(timeout=30)
    assert not stopper.is_alive()
    assert sup.stats.sleep_refusals >= 1 and sup.stats.sleeps == 1
    assert loop.seen == [BLOCK, 1]
    assert env.rt is not None
    env.rt.stop()
    env.sup = env.rt = None

    sup = env.boot()
    assert sup.state("c") is LifecycleState.ASLEEP
    assert sup.stats.wakes == 0  # slept at stop: both posts acknowledged, nothing kept
    assert env.hub.kept_messages("agent://c/a") == []
    assert _finish(env, "c") == [BLOCK, 1]
