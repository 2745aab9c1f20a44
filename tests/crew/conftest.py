"""Fixtures for crew tests: a runtime on a virtual clock and a crew launcher."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest

import orkeon_actors as ok
from orkeon_actors.crew import CrewActor, CrewStatus, query_crew, start_crew
from orkeon_actors.testing import wait_until


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str | None, str, str]] = []

    def record(self, crew_id: str, agent_id: str | None, kind: str, detail: str) -> None:
        self.events.append((crew_id, agent_id, kind, detail))


class Crews:
    """Start crews on one runtime; stop them all at the end."""

    def __init__(self, runtime: ok.Runtime, clock: ok.VirtualClock) -> None:
        self.runtime = runtime
        self.clock = clock
        self.refs: list[pykka.ActorRef[Any]] = []
        self.recorder = Recorder()

    def start(self, cls: type[CrewActor] = CrewActor, **kwargs: Any) -> pykka.ActorRef[Any]:
        kwargs.setdefault("observer", self.recorder)
        ref = cls.start(self.runtime.hub, **kwargs)
        self.refs.append(ref)
        start_crew(ref)
        return ref

    def settle(self, ref: pykka.ActorRef[Any], *statuses: CrewStatus) -> CrewStatus:
        wanted = statuses or (CrewStatus.COMPLETED, CrewStatus.FAILED, CrewStatus.WAITING)
        wait_until(lambda: query_crew(ref, "status") in wanted, what=f"crew status in {wanted}")
        status: CrewStatus = query_crew(ref, "status")
        return status

    def stop(self) -> None:
        for ref in self.refs:
            ref.stop()


@pytest.fixture
def crews() -> Iterator[Crews]:
    clock = ok.VirtualClock()
    rt = ok.Runtime.start(clock=clock)
    c = Crews(rt, clock)
    try:
        yield c
    finally:
        c.stop()
        rt.stop()


Launcher = Callable[..., pykka.ActorRef[Any]]


@pytest.fixture
def rt() -> Iterator[ok.Runtime]:
    """A runtime on the system clock (its I/O loop runs real async calls)."""
    runtime = ok.Runtime.start()
    yield runtime
    runtime.stop()


def run_crew(rt: ok.Runtime, agents: list[Any], orchestration: Any) -> str | None:
    """Start a crew of ``agents`` on ``rt``, wait for it and return its result."""
    from orkeon_actors.crew import wait_finished

    ref = CrewActor.start(rt.hub, agents=agents, orchestration=orchestration)
    try:
        start_crew(ref)
        return wait_finished(ref, timeout=30).result
    finally:
        ref.stop()
