"""The host harness's crew ops, in process on a local host: a crew that fails before it
waits for a message makes ``sleep_crew`` and ``sleepers`` raise its failure at once,
instead of polling a finished crew until their timeout."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel
from orkeon_actors.errors import CrewFailedError
from orkeon_actors.fleet.host_main import OPS, HostState
from orkeon_actors.lifecycle import CrewBlueprint
from orkeon_actors.orchestration import Sequential, Task

LONG = 600.0
"""The ops' timeout: a poll of the failed crew would hold the test this long."""


class _Broken(RuntimeError):
    pass


def _fails(request: ModelRequest) -> ModelResponse:
    raise _Broken(f"model of {request.crew_id} is broken")


def _broken(_crew: object) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(policy=_fails))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("work", agent.agent_id)]))


FACTORIES: dict[str, Any] = {"broken": _broken}


@pytest.fixture
def state(tmp_path: Path) -> Iterator[HostState]:
    runtime = ok.Runtime.start(store=str(tmp_path / "host.db"))
    host = HostState(runtime, "local")
    OPS["serve_crews"](host, factories=f"{__name__}:FACTORIES")
    yield host
    host.supervisor.stop(timeout=0)
    runtime.stop()


def _within_the_test(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run the op on another thread; a regression (a 600 s poll) fails the wait, not CI's clock."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result(timeout=120)


def test_sleep_crew_raises_the_failure_of_a_crew_that_failed_before_waiting(state: HostState) -> None:
    OPS["spawn_local"](state, "broken", "b1")
    with pytest.raises(CrewFailedError, match="crew b1 failed before it waited for a message") as raised:
        _within_the_test(OPS["sleep_crew"], state, "b1", timeout=LONG)
    assert "model of b1 is broken" in str(raised.value)
    assert raised.value.crew_id == "b1"


def test_sleepers_stops_at_the_first_failed_crew(state: HostState) -> None:
    with pytest.raises(CrewFailedError, match="crew s0 failed"):
        _within_the_test(OPS["sleepers"], state, kind="broken", crews=["s0", "s1"], timeout=LONG)
