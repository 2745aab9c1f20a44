"""Fixtures for lifecycle tests: a durable runtime on a virtual clock with a supervisor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

import orkeon_actors as ok
from orkeon_actors.crew import CrewActor, CrewSnapshot, CrewStatus, query_crew
from orkeon_actors.lifecycle import CrewSupervisor, LifecycleState
from orkeon_actors.lifecycle.activation import CrewSource
from orkeon_actors.testing import wait_until


class Env:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.clock = ok.VirtualClock()
        self.rt: ok.Runtime | None = None
        self.sup: CrewSupervisor | None = None
        self.factories: dict[str, CrewSource] = {}

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

    def status(self, crew: str) -> CrewStatus | None:
        assert self.sup is not None
        return self.sup.status(crew)

    def snapshot(self, crew: str) -> CrewSnapshot:
        """The crew as data: its live actor's snapshot, or its final state once it
        finished (its outcome's). Waits while it has neither (between the two)."""
        assert self.sup is not None
        sup = self.sup
        found: list[CrewSnapshot] = []

        def available() -> bool:
            outcome = sup.outcome(crew)
            if outcome is not None:
                final = outcome.final_snapshot()
                assert final is not None, "the supervisor keeps no final states (finished_memory=0)"
                found.append(final)
                return True
            ref = sup.ref(crew)
            if ref is None:
                return False
            try:
                found.append(query_crew(ref, "snapshot"))
            except pykka.ActorDeadError:  # finished and stopping: its outcome comes next
                return False
            return True

        wait_until(available, what=f"crew {crew} live or finished")
        return found[-1]

    def settle(self, crew: str, *statuses: CrewStatus) -> CrewStatus:
        wanted = statuses or (CrewStatus.COMPLETED, CrewStatus.FAILED, CrewStatus.WAITING)
        seen: list[CrewStatus | None] = [None]

        def settled() -> bool:
            seen[0] = self.status(crew)
            return seen[0] in wanted

        wait_until(settled, what=f"crew {crew} in {wanted}")
        assert seen[0] is not None
        return seen[0]

    def summary(self, crew: str) -> Any:
        """(status, result, failure) of a finished crew (waits for its outcome)."""
        assert self.sup is not None
        sup = self.sup
        wait_until(lambda: sup.outcome(crew) is not None, what=f"crew {crew}'s outcome")
        outcome = sup.outcome(crew)
        assert outcome is not None
        return outcome.status, outcome.result, outcome.failure

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
