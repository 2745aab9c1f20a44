"""A post to a mailbox of a crew that has finished is refused with MailboxNotFoundError
saying the crew finished (it was accepted silently, kept for nobody)."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewActor, CrewStatus, ScriptedModel, query_crew, respond, start_crew
from orkeon_actors.errors import MailboxNotFoundError
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until


@pytest.mark.parametrize("store", [False, True], ids=["memory", "sqlite"])
@pytest.mark.parametrize(("script", "how"), [([respond("done")], "completed"), ([], "failed")])
def test_posting_to_a_finished_crew_without_supervisor_is_refused(
    tmp_path: object, store: bool, script: list[object], how: str
) -> None:
    rt = ok.Runtime.start(store=f"{tmp_path}/s.db") if store else ok.Runtime.start()
    with rt:
        agent = Agent("a", ScriptedModel(script))  # type: ignore[arg-type]
        plan = Sequential([Task("go", agent.agent_id)])
        ref = CrewActor.start(rt.hub, agents=[agent], orchestration=plan, crew_id="c1")
        try:
            start_crew(ref)
            wait_until(lambda: query_crew(ref, "status") in (CrewStatus.COMPLETED, CrewStatus.FAILED), what="finished")
            for address in ("agent://c1/a", "crew://c1"):
                with pytest.raises(MailboxNotFoundError) as caught:
                    rt.hub.bind("x", "y").post(address, {"late": 1})
                assert caught.value.finished == how and f"has finished ({how})" in str(caught.value)
                with pytest.raises(MailboxNotFoundError):
                    rt.hub.bind("x", "y").send(address, {"late": 1}, timeout=1)
            assert query_crew(ref, "status").value == how  # still answers queries until stopped
        finally:
            ref.stop()
        rt.hub.register_mailbox("agent://c1/a")  # the id used again: posts are accepted
        rt.hub.bind("x", "y").post("agent://c1/a", {"new": 1})
        with pytest.raises(MailboxNotFoundError) as caught:
            rt.hub.bind("x", "y").post("crew://c1", {"late": 1})
        assert caught.value.finished is None
