"""A hypothesis state machine over one crew looping on ``receive_message``: posts,
explicit sleeps, idle time passing (idle sleeps) and restarts of the runtime and
supervisor on the same SQLite file in any order; every post is received once, in order,
and the crew ends with the result of an uninterrupted run.

Restarts are graceful (``CrewSupervisor.stop()`` puts the crew to sleep) or abrupt
(``stop(timeout=0)`` parks it as it is: the store is left as a crash would leave it, and
the next boot restores the crew from its last snapshot and redelivers the posts it
consumed since). Real SIGKILLs are in ``test_crash_ack.py``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

from .conftest import Env

STOP = "stop"


def _payloads(messages: Any) -> list[Any]:
    return [json.loads(m.content)["message"]["payload"] for m in messages if m.role == "tool"]


def _policy(request: ModelRequest) -> ModelResponse:
    seen = _payloads(request.messages)
    if seen and seen[-1] == STOP:
        return respond(json.dumps(seen[:-1]))
    return call("receive_message", {"wait_forever": True})


def _loop(_crew: Any) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(policy=_policy))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("loop", agent.agent_id)]))


class SleepWakeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.env = Env(Path(self.dir.name) / "life.db")
        self.env.factories["loop"] = _loop
        self.env.boot(idle_timeout=5)
        assert self.env.sup is not None
        self.env.sup.spawn("loop", "c")
        self.env.settle("c")  # its mailbox is registered
        self.posted: list[int] = []
        self.sleeps = 0
        self.restarts = 0

    def _sup(self) -> Any:
        assert self.env.sup is not None
        return self.env.sup

    @rule()
    def post(self) -> None:
        n = len(self.posted)
        self.env.hub.bind("shop", "desk").post("agent://c/a", n)
        self.posted.append(n)

    @rule()
    def sleep(self) -> None:
        if self._sup().sleep("c"):
            self.sleeps += 1

    @rule(seconds=st.sampled_from([1, 6]))
    def time_passes(self, seconds: int) -> None:
        self.env.clock.advance(seconds)
        sup = self._sup()  # an idle sleep it started has ended (asleep, or refused: active)
        wait_until(lambda: sup.state("c") in (LifecycleState.ACTIVE, LifecycleState.ASLEEP), what="c settled")

    @rule()
    def restart(self) -> None:
        self._restart(timeout=30.0)

    @precondition(lambda self: self.env.hub.load_snapshot("c") is not None)  # else nothing to restore
    @rule()
    def abrupt_restart(self) -> None:
        self._restart(timeout=0.0)

    def _restart(self, timeout: float) -> None:
        self._sup().stop(timeout=timeout)
        assert self.env.rt is not None
        self.env.rt.stop()
        self.env.sup = self.env.rt = None
        self.env.boot(idle_timeout=5)
        self.restarts += 1

    @invariant()
    def never_finished_early(self) -> None:
        assert self._sup().state("c") not in (LifecycleState.COMPLETED, LifecycleState.FAILED, LifecycleState.UNKNOWN)

    def teardown(self) -> None:
        try:
            self.env.hub.bind("shop", "desk").post("agent://c/a", STOP)
            assert self.env.settle("c", CrewStatus.COMPLETED, CrewStatus.FAILED) is CrewStatus.COMPLETED
            _, result, failure = self.env.summary("c")
            assert failure is None and json.loads(result) == self.posted
        finally:
            self.env.shutdown()
            self.dir.cleanup()


SleepWakeMachine.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=14,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_sleep_and_wake_in_any_order_lose_and_duplicate_nothing = SleepWakeMachine.TestCase
