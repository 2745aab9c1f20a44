"""Fixtures for lifecycle tests: a durable runtime on a virtual clock with a supervisor."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

import orkeon_actors as ok
from orkeon_actors.crew import CrewActor, CrewStatus, query_crew
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor, LifecycleState
from orkeon_actors.testing import wait_until


class Env:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.clock = ok.VirtualClock()
        self.rt: ok.Runtime | None = None
        self.sup: CrewSupervisor | None = None
        self.factories: dict[str, Callable[[ok.CrewId], CrewBlueprint]] = {}

    def boot(self, **options: Any) -> CrewSupervisor:
        self.rt = ok.Runtime.start(store=str(self.db), clock=self.clock)
        self.sup = CrewSupervisor(self.rt, factories=self.factories, **options)
        return self.sup

    def shutdown(self) -> None:
        if self.sup is not None:
            self.sup.stop()
        if self.rt is not None:
            self.rt.stop()
        self.sup = None
        self.rt = None

    def restart(self, **options: Any) -> CrewSupervisor:
        self.shutdown()
        return self.boot(**options)

    @property
    def hub(self) -> Any:
        assert self.rt is not None
        return self.rt.hub

    def live(self, crew: str) -> pykka.ActorRef[CrewActor]:
        assert self.sup is not None
        sup = self.sup
        wait_until(lambda: sup.ref(crew) is not None, what=f"crew {crew} live")
        ref = sup.ref(crew)
        assert ref is not None
        return ref

    def settle(self, crew: str, *statuses: CrewStatus) -> CrewStatus:
        wanted = statuses or (CrewStatus.COMPLETED, CrewStatus.FAILED, CrewStatus.WAITING)
        ref = self.live(crew)
        wait_until(lambda: query_crew(ref, "status") in wanted, what=f"crew {crew} in {wanted}")
        status: CrewStatus = query_crew(ref, "status")
        return status

    def summary(self, crew: str) -> Any:
        return query_crew(self.live(crew), "summary")

    def asleep(self, crew: str) -> None:
        assert self.sup is not None
        sup = self.sup
        wait_until(lambda: sup.state(crew) is LifecycleState.ASLEEP, what=f"crew {crew} asleep")


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path / "life.db")
    try:
        yield e
    finally:
        e.shutdown()
