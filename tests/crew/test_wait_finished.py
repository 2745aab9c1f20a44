"""``orkeon_actors.crew.wait_finished(ref)``: block until a crew run without a supervisor
finishes; its outcome, or its failure as ``CrewFailedError``."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pykka
import pytest

import orkeon_actors as ok
from orkeon_actors.crew import (
    Agent,
    CrewActor,
    CrewOutcome,
    CrewStatus,
    ScriptedModel,
    call,
    respond,
    start_crew,
    wait_finished,
)
from orkeon_actors.errors import (
    CrewFailedError,
    CrewNotFoundError,
    CrewStoppedError,
    CrewWaitTimeoutError,
    InvalidArgumentError,
)
from orkeon_actors.orchestration import Sequential, Task

from .conftest import Crews


def _start(crews: Crews, *script: Any, crew_id: str = "c1") -> pykka.ActorRef[CrewActor]:
    agent = Agent("a", ScriptedModel(list(script)))
    return crews.start(Watched, agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]), crew_id=crew_id)


def test_wait_finished_returns_the_outcome_once_the_crew_completes(crews: Crews) -> None:
    ref = _start(crews, call("receive_message", {"wait_forever": True}), respond("done"))
    crews.settle(ref, CrewStatus.WAITING)
    with pytest.raises(CrewWaitTimeoutError) as caught:
        wait_finished(ref, timeout=0.05)
    assert isinstance(caught.value, TimeoutError)
    assert "crew c1 did not finish" in str(caught.value) and "waiting for message" in str(caught.value)
    got: list[CrewOutcome] = []
    waiter = threading.Thread(target=lambda: got.append(wait_finished(ref, timeout=timedelta(seconds=30))))
    waiter.start()
    crews.runtime.hub.bind("other", "x").post("agent://c1/a", {"go": 1})
    waiter.join(30)
    [outcome] = got
    assert outcome.status is CrewStatus.COMPLETED and outcome.result == "done"
    snapshot = outcome.final_snapshot()
    assert snapshot is not None and str(snapshot.id) == "c1"
    assert wait_finished(ref).result == "done"  # already finished: at once


def test_wait_finished_raises_the_crews_failure_typed(crews: Crews) -> None:
    ref = _start(crews)  # an empty script: the model has nothing to say, the crew fails
    with pytest.raises(CrewFailedError) as caught:
        wait_finished(ref, timeout=30)
    error = caught.value
    assert error.crew_id == "c1" and error.failure is not None and str(error.failure) in str(error)
    assert isinstance(error.outcome, CrewOutcome) and error.outcome.status is CrewStatus.FAILED


def test_a_timeout_beyond_what_the_platform_can_wait_is_honoured(crews: Crews) -> None:
    ref = _start(crews, respond("done"))
    assert wait_finished(ref, timeout=1e10).result == "done"  # raised OverflowError before
    assert wait_finished(ref, timeout=timedelta.max).result == "done"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "soon", True])
def test_a_bad_timeout_is_refused_with_a_typed_error(crews: Crews, bad: Any) -> None:
    ref = _start(crews, respond("done"))
    with pytest.raises(InvalidArgumentError, match="wait_finished timeout"):
        wait_finished(ref, timeout=bad)


def test_a_crew_stopped_before_it_finished_raises_crew_stopped(crews: Crews) -> None:
    ref = _start(crews, call("receive_message", {"wait_forever": True}), respond("done"))
    crews.settle(ref, CrewStatus.WAITING)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            wait_finished(ref, timeout=30)
        except CrewStoppedError as exc:
            errors.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    ok.testing.wait_until(lambda: _watched(ref), what="the waiter's watch registered")
    ref.stop()
    waiter.join(30)
    [error] = errors
    assert isinstance(error, CrewNotFoundError) and "sup.wait_finished" in str(error)
    with pytest.raises(CrewStoppedError):  # and at once on a stopped actor
        wait_finished(ref, timeout=30)


class Watched(CrewActor):
    """A crew that says how many ``wait_finished`` watches it holds."""

    def watching(self) -> int:
        return len(self.finish_watches)


def _watched(ref: pykka.ActorRef[CrewActor]) -> bool:
    count: int = ref.proxy().watching().get()
    return count > 0


def test_a_wait_that_gives_up_withdraws_its_watch(crews: Crews) -> None:
    ref = _start(crews, call("receive_message", {"wait_forever": True}), respond("done"))
    crews.settle(ref, CrewStatus.WAITING)
    for _ in range(3):
        with pytest.raises(CrewWaitTimeoutError):
            wait_finished(ref, timeout=0.01)
    ok.testing.wait_until(lambda: not _watched(ref), what="every watch withdrawn")


def test_start_crew_then_wait_finished_the_documented_pattern() -> None:
    with ok.Runtime.start() as rt:
        agent = Agent("a", ScriptedModel([respond("hello")]))
        ref = CrewActor.start(rt.hub, agents=[agent], orchestration=Sequential([Task("greet", "a")]))
        start_crew(ref)
        try:
            assert wait_finished(ref, timeout=30).result == "hello"
        finally:
            ref.stop()
