"""The documented crew pattern; ``mypy --strict`` must accept it (tests/typing/test_typing.py)."""

from __future__ import annotations

import orkeon_actors as ok
from orkeon_actors.crew import (
    Agent,
    CrewActor,
    CrewOutcome,
    CrewStatus,
    ScriptedModel,
    query_crew,
    respond,
    start_crew,
    wait_finished,
)
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until


class OrderCrew(CrewActor):
    name = "order-processor"

    def route(self, message: ok.Message) -> ok.AgentId:
        return ok.AgentId("intake")


def run() -> CrewStatus:
    with ok.Runtime.start() as rt:
        intake = Agent("intake", ScriptedModel([respond("done")]))
        ref = OrderCrew.start(rt.hub, agents=[intake], orchestration=Sequential([Task("go", "intake")]), crew_id="o-1")
        start_crew(ref)
        wait_until(lambda: query_crew(ref, "status") is CrewStatus.COMPLETED, what="the crew completed")
        status: CrewStatus = query_crew(ref, "status")
        outcome: CrewOutcome = wait_finished(ref, timeout=30)
        ref.stop()
        assert outcome.status is status
        return status
