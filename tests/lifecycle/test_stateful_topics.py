"""A hypothesis state machine over one agent reading two topics with
``wait_for_event`` (two cursors, parked on one at a time): bursts published on either
topic, explicit sleeps, idle time passing (idle sleeps) and graceful restarts of the
runtime and supervisor on the same SQLite file, in any order. Every event is read once,
in publish order per topic, as in an uninterrupted run: events for the cursor it is not
parked on are kept while it sleeps, bursts around a wake are handed over."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from orkeon_actors.crew import (
    Agent,
    CrewStatus,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    call,
    respond,
)
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

from .conftest import Env

STOP = "stop"
TOPICS = ("orders", "audit")


def _policy(request: ModelRequest) -> ModelResponse:
    """Opens the ``audit`` cursor (a first read that times out), then reads the topics
    alternately (only the one left once a topic's ``stop`` was read)."""
    results = [json.loads(m.content) for m in request.messages if m.role == "tool"]
    if not results:
        return call("wait_for_event", {"topic": "audit", "timeout_ms": 1_000})
    reads = [r["message"] for r in results[1:]]
    done = {r["topic"] for r in reads if r["payload"] == STOP}
    if done == set(TOPICS):
        by_topic = {t: [r["payload"] for r in reads if r["topic"] == t and r["payload"] != STOP] for t in TOPICS}
        return respond(json.dumps(by_topic))
    still = [t for t in TOPICS if t not in done]
    return call("wait_for_event", {"topic": still[len(reads) % len(still)], "wait_forever": True})


def _reader(_crew: Any) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(policy=_policy), max_turns=1_000)
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("read", agent.agent_id)]))


class TopicSleepMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.env = Env(Path(self.dir.name) / "life.db")
        self.env.factories["reader"] = _reader
        self.env.boot(idle_timeout=5)
        self._sup().spawn("reader", "c")
        self.env.settle("c")  # parked on the audit cursor
        self.env.clock.advance(1)  # that first read times out: the cursor stays open
        wait_until(lambda: self._parked_on("orders"), what="c parked on orders, both cursors open")
        self.published: dict[str, list[int]] = {t: [] for t in TOPICS}

    def _parked_on(self, topic: str) -> bool:
        snapshot = self.env.snapshot("c")
        return [w.kind.topic for w in snapshot.pending_waits] == [topic]

    def _sup(self) -> Any:
        assert self.env.sup is not None
        return self.env.sup

    @rule(topic=st.sampled_from(TOPICS), burst=st.integers(1, 6))
    def publish(self, topic: str, burst: int) -> None:
        publisher = self.env.hub.bind("shop")
        for _ in range(burst):
            n = len(self.published[topic])
            publisher.publish(topic, n)
            self.published[topic].append(n)

    @rule()
    def sleep(self) -> None:
        self._sup().sleep("c")

    @rule(seconds=st.sampled_from([1, 6]))
    def time_passes(self, seconds: int) -> None:
        self.env.clock.advance(seconds)
        sup = self._sup()  # an idle sleep it started has ended (asleep, or refused: active)
        wait_until(lambda: sup.state("c") in (LifecycleState.ACTIVE, LifecycleState.ASLEEP), what="c settled")

    @rule()
    def restart(self) -> None:
        self.env.restart(idle_timeout=5)

    @invariant()
    def never_finished_early(self) -> None:
        assert self._sup().state("c") not in (LifecycleState.COMPLETED, LifecycleState.FAILED, LifecycleState.UNKNOWN)

    def teardown(self) -> None:
        try:
            publisher = self.env.hub.bind("shop")
            for topic in TOPICS:
                publisher.publish(topic, STOP)
            assert self.env.settle("c", CrewStatus.COMPLETED, CrewStatus.FAILED) is CrewStatus.COMPLETED
            _, result, failure = self.env.summary("c")
            assert failure is None and json.loads(result) == self.published
        finally:
            self.env.shutdown()
            self.dir.cleanup()


TopicSleepMachine.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_two_cursors_across_sleeps_and_restarts_lose_and_duplicate_nothing = TopicSleepMachine.TestCase
