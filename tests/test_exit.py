"""A program that never calls ``rt.stop()`` exits, keeping what it committed, and
Ctrl-C ends a program blocked in ``wait_for`` with ``KeyboardInterrupt``. Each case runs
a real child interpreter."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import orkeon_actors as ok

FORGETS_STOP = textwrap.dedent(
    """
    import sys
    import orkeon_actors as ok
    rt = ok.Runtime.start(store=sys.argv[1])
    rt.hub.register_mailbox("agent://c/inbox")
    rt.hub.bind("c", "a").post("agent://c/inbox", {"n": 1})
    keep = ok.PublishOptions(retain_as_last_value=True, last_value_key="k")
    rt.hub.bind("c", "a").publish("t", {"v": 2}, options=keep)
    print("posted", flush=True)
    """
)

BLOCKS_IN_WAIT = textwrap.dedent(
    """
    import orkeon_actors as ok
    rt = ok.Runtime.start()
    print("waiting", flush=True)
    rt.hub.bind("c", "a").wait_for(ok.WaitOnTopic("never"), ok.FOREVER)
    """
)

BLOCKS_IN_WAIT_FINISHED = textwrap.dedent(
    """
    import orkeon_actors as ok
    from orkeon_actors.crew import Agent, CrewActor, ScriptedModel, call, respond, start_crew, wait_finished
    from orkeon_actors.orchestration import Sequential, Task
    rt = ok.Runtime.start()
    agent = Agent("a", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("done")]))
    ref = CrewActor.start(rt.hub, agents=[agent], orchestration=Sequential([Task("go", "a")]))
    start_crew(ref)
    print("waiting", flush=True)
    wait_finished(ref)  # the crew waits for mail forever: only Ctrl-C ends this
    """
)


def test_a_program_that_never_stops_its_runtime_exits_and_keeps_its_commits(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    child = subprocess.run([sys.executable, "-c", FORGETS_STOP, str(db)], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "posted"
    assert "Traceback" not in child.stderr
    with ok.Runtime.start(store=db) as rt:
        box = rt.hub.register_mailbox("agent://c/inbox")
        assert box.reader().receive().json() == {"n": 1}
        last = rt.hub.system.get_last_value("k")
        assert last is not None and last.json() == {"v": 2}


@pytest.mark.parametrize("program", [BLOCKS_IN_WAIT, BLOCKS_IN_WAIT_FINISHED], ids=["wait_for", "wait_finished"])
def test_ctrl_c_ends_a_program_blocked_in_wait_for(program: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "waiting"
    child.send_signal(signal.SIGINT)
    try:
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode != 0
    assert stderr.rstrip().endswith("KeyboardInterrupt")
