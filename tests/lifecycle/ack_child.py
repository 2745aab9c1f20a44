"""A crew looping on ``receive_message``, run as a child process by
``test_crash_ack.py``, which SIGKILLs it while the crew is active.

Usage::

    python tests/lifecycle/ack_child.py DB STEP [STEP ...]

Crew ``loop`` (agent ``a``) receives posts to ``agent://loop/a`` forever; a post
``"stop"`` ends it with the JSON list of every payload it received, in order (its
conversation, which is what a snapshot restores). Steps, run in order after the boot:

* ``spawn[:checkpoint]``: spawn the crew (checkpointed at its first wait), wait until
  it waits for mail (and its checkpoint committed);
* ``post:A-B``: post the payloads ``A .. B-1`` (each durable once ``post`` returns);
* ``seen:N``: wait until the crew's model was given its ``N``-th post (all of them
  handled: consumed, in the conversation);
* ``sleep``: put the crew to sleep (its snapshot and acknowledgements committed);
* ``kill-in-save``: SIGKILL inside the next snapshot transaction (before its commit);
* ``kill``: print ``KILLED`` and SIGKILL the process;
* ``state``: print ``STATE <json>``: the crew's lifecycle state, the kept rows and its
  bookkeeping rows (``processed_messages`` and mailbox marks);
* ``finish``: post ``"stop"``, wait for the crew to complete, print ``RESULT <json>``;

The process ends with a graceful ``CrewSupervisor.stop()`` and ``Runtime.stop()``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.store import faults
from orkeon_actors.testing import wait_until

STOP = "stop"
FINISHED = (CrewStatus.COMPLETED, CrewStatus.FAILED)
_seen: list[object] = []
_seen_lock = threading.Lock()


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def policy(request: ModelRequest) -> ModelResponse:
    payloads = [json.loads(m.content)["message"]["payload"] for m in request.messages if m.role == "tool"]
    with _seen_lock:
        _seen[:] = payloads
    if payloads and payloads[-1] == STOP:
        return respond(json.dumps(payloads[:-1]))
    return call("receive_message", {"wait_forever": True})


def loop(_crew: ok.CrewId) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(policy=policy))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("loop", agent.agent_id)]))


def seen() -> int:
    with _seen_lock:
        return len(_seen)


def main() -> None:
    db, *steps = sys.argv[1:]
    rt = ok.Runtime.start(store=db, clock=ok.VirtualClock())
    sup = CrewSupervisor(rt, factories={"loop": loop})
    poster = rt.hub.bind("shop", "desk")

    def status() -> CrewStatus | None:
        return sup.status("loop")

    for step in steps:
        name, _, arg = step.partition(":")
        if name == "spawn":
            sup.spawn("loop", "loop", checkpoint=arg == "checkpoint")
            wait_until(lambda: status() is CrewStatus.WAITING, what="loop waiting")
            wait_until(lambda: sup.durable("loop"), what="its checkpoint committed")
        elif name == "post":
            start, end = (int(x) for x in arg.split("-"))
            for n in range(start, end):
                poster.post("agent://loop/a", n)
        elif name == "seen":
            wait_until(lambda n=int(arg): seen() >= n, what=f"post {arg} seen")  # type: ignore[misc]
            wait_until(lambda: status() is CrewStatus.WAITING, what="loop waiting again")
        elif name == "sleep":
            assert sup.sleep("loop") is True
        elif name == "kill-in-save":
            faults.install(lambda point: die() if point == "lifecycle.save" else None)
        elif name == "kill":
            emit("KILLED")
            die()
        elif name == "state":
            kept = rt.hub.readers.query("SELECT count(*) FROM mailboxes")[0][0]
            rows = rt.hub.readers.query(
                "SELECT (SELECT count(*) FROM processed_messages) + (SELECT count(*) FROM mailbox_marks)"
            )[0][0]
            emit("STATE " + json.dumps({"state": sup.state("loop").value, "kept": kept, "bookkeeping": rows}))
        elif name == "finish":
            poster.post("agent://loop/a", STOP)
            wait_until(lambda: sup.outcome("loop") is not None, what="loop done", timeout=30)
            outcome = sup.outcome("loop")
            assert outcome is not None and outcome.status in FINISHED
            st, result, failure = outcome.status, outcome.result, outcome.failure
            emit("RESULT " + json.dumps({"status": st.value, "result": result, "failure": str(failure or "")}))
        else:
            raise SystemExit(f"unknown step {step!r}")
    sup.stop()
    rt.stop()


if __name__ == "__main__":
    main()
