"""Every orchestration mode sleeps and wakes mid-run with the outcome of an
uninterrupted run: each example crew of ``orkeon_actors.sim.examples`` is run twice
under the supervisor, once put to sleep at every wait and once never, with the same
triggers; their final results must be equal."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from orkeon_actors.crew import CrewStatus, ModelRequest, ModelResponse, OnTopic, call
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Autonomous
from orkeon_actors.sim.examples import EXAMPLES
from orkeon_actors.testing import wait_until

from .conftest import Env

GATE = "gate-"


class Gated:
    """Wraps a model: every task starts with a ``wait_for_event("gate.<agent>")``, so
    every agent of every mode parks on a wait mid-run; the wrapped model sees the
    conversation without the gate's turns (its answers are those of the bare example)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def complete(self, request: ModelRequest) -> ModelResponse:
        messages = request.messages
        if messages and messages[-1].role == "user":
            return call(
                "wait_for_event",
                {"topic": f"gate.{request.agent_id}", "timeout_ms": 60_000},
                call_id=f"{GATE}{len(messages)}",
            )
        bare = tuple(
            m
            for m in messages
            if not (m.tool_call_id or "").startswith(GATE) and not any(c.id.startswith(GATE) for c in m.tool_calls)
        )
        response: ModelResponse = self.inner.complete(attrs.evolve(request, messages=bare))
        return response


class _Capture:
    """Stands in for a ``Simulation``: the example's ``spawn`` becomes a blueprint."""

    def __init__(self) -> None:
        self.blueprint: CrewBlueprint | None = None

    def spawn(self, name: str, *, agents: Any, orchestration: Any, **options: Any) -> str:
        if isinstance(orchestration, Autonomous):
            factory = orchestration.model_factory
            orchestration.model_factory = lambda role, depth: Gated(factory(role, depth))
        gated = [attrs.evolve(a, model=Gated(a.model)) for a in agents]
        self.blueprint = CrewBlueprint(agents=gated, orchestration=orchestration)
        return name


def _factory(mode: str) -> Any:
    def build(_crew: Any) -> CrewBlueprint:
        capture = _Capture()
        EXAMPLES[mode](capture)  # type: ignore[arg-type]
        assert capture.blueprint is not None
        return capture.blueprint

    return build


def _settle(env: Env, crew: str) -> CrewStatus:
    """Finished, or waiting *on a wait*: a crew is also ``Waiting`` for an instant while
    a message between its agents (a delegation posted to a mailbox) is on its way."""
    seen: list[CrewStatus | None] = [None]

    def settled() -> bool:
        status = seen[0] = env.status(crew)
        if status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            return True
        return status is CrewStatus.WAITING and bool(env.snapshot(crew).pending_waits)

    wait_until(settled, what=f"crew {crew} finished or parked on a wait")
    assert seen[0] is not None
    return seen[0]


def _run(env: Env, mode: str, trigger: str, *, sleep: bool) -> tuple[Any, int]:
    sup = env.sup
    assert sup is not None
    crew = f"{mode}-{trigger}-{'sleep' if sleep else 'awake'}"
    sup.spawn(mode, crew)
    sleeps = 0
    client = env.hub.bind("driver")
    while (status := _settle(env, crew)) is CrewStatus.WAITING:
        waits = env.snapshot(crew).pending_waits
        if sleep:
            assert sup.sleep(crew) is True
            assert sup.state(crew) is LifecycleState.ASLEEP
            assert {w.wait_id for w in env.hub.load_pending_waits(crew)} == {w.wait_id for w in waits}
            sleeps += 1
        if trigger == "timeout":
            env.clock.advance(61)
        else:
            for topic in sorted({w.kind.topic for w in waits if isinstance(w.kind, OnTopic)}):
                client.publish(topic, {"go": topic})
    assert status is CrewStatus.COMPLETED, env.summary(crew)
    _, result, failure = env.summary(crew)
    return (result, failure), sleeps


@pytest.mark.parametrize("trigger", ["message", "timeout"])
@pytest.mark.parametrize("mode", sorted(EXAMPLES))
def test_every_mode_sleeps_at_every_wait_with_the_outcome_of_an_uninterrupted_run(
    env: Env, mode: str, trigger: str
) -> None:
    env.factories[mode] = _factory(mode)
    sup = env.boot()
    awake, none = _run(env, mode, trigger, sleep=False)
    asleep, sleeps = _run(env, mode, trigger, sleep=True)
    assert none == 0 and sleeps >= 1  # slept mid-run (every agent's task starts on a wait)
    assert awake[0] is not None and awake[1] is None
    assert asleep == awake
    assert sup.stats.sleeps == sleeps and sup.stats.wakes == sleeps
