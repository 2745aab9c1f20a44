"""A crew told End from outside ends as failed with the cause it carried: its supervisor
records the outcome and closes its mailboxes, as for any other failure."""

from __future__ import annotations

from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.bench.lifecycle import FACTORIES, FOREVER_NAME
from orkeon_actors.crew import CrewStatus
from orkeon_actors.crew.protocol import End
from orkeon_actors.errors import CrewFailedError, MailboxNotFoundError
from orkeon_actors.lifecycle import CrewSupervisor, LifecycleState
from orkeon_actors.testing import wait_until


def test_a_crew_told_end_fails_with_its_cause_and_closes_its_mailboxes(tmp_path: Path) -> None:
    runtime = ok.Runtime.start(store=str(tmp_path / "end.db"))
    supervisor = CrewSupervisor(runtime, factories=FACTORIES)
    try:
        crew = supervisor.spawn(FOREVER_NAME, "billing-1")
        wait_until(lambda: supervisor.status(crew) is CrewStatus.WAITING, timeout=20, what="the crew waiting")
        ref = supervisor.ref(crew)
        assert ref is not None
        ref.tell(End("CrewStopped", "stopped by the operator"))
        with pytest.raises(CrewFailedError, match="stopped by the operator"):
            supervisor.wait_finished(crew, timeout=20)
        assert supervisor.state(crew) is LifecycleState.FAILED
        with pytest.raises(MailboxNotFoundError):
            runtime.hub.bind("caller").post("agent://billing-1/a", b"{}")
    finally:
        supervisor.stop()
        runtime.stop()
