"""A supervised crew on a SQLite store whose agent posts with ``post_message``, run as a
child process by ``test_crash_replay.py`` and killed (SIGKILL) between that tool call
and its next model call.

Usage::

    python tests/crew/replay_child.py DB PHASE IDS

The crew ``p1`` (spawned with ``checkpoint=True``: durable from its first wait) has one
agent ``a`` that waits on ``receive_message``; given a message, it posts
``{"order": n}`` to ``agent://sink/s`` with ``post_message``, then answers ``"posted n"``.
``IDS``: ``stable`` (the scripted model's call ids, the same when asked again) or
``fresh`` (a new random call id at every answer, as an LLM provider mints them).
Phases:

* ``kill``: spawn ``p1``, wait until its checkpoint committed, post ``{"n": 7}`` to it;
  the model kills the process (SIGKILL) when it is asked with the post's result in the
  conversation, i.e. after the post was made and before the agent's next model turn;
* ``resume``: boot, wake ``p1`` if the boot did not, wait for its answer; print
  ``RESULT <json>``: its status and result, the messages waiting in ``agent://sink/s``
  and the rows of the agent's sent history.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import uuid
from typing import Any

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

SINK = "agent://sink/s"
_out = threading.Lock()


def emit(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class ProviderLike(ScriptedModel):
    """Answers like a real provider: asked again, it mints new call ids, so only the
    checkpoint before the post lets the replay find the call's key."""

    replays_identically = False


def crew(kill: bool, fresh_ids: bool) -> Any:
    def policy(request: ModelRequest) -> ModelResponse:
        results = [json.loads(m.content) for m in request.messages if m.role == "tool"]
        received = [r["message"]["payload"] for r in results if isinstance(r.get("message"), dict)]
        posted = [r for r in results if "message_id" in r]
        if not received:
            return call("receive_message", {"wait_forever": True})
        order = received[-1]["n"]
        if not posted:
            call_id = f"call_{uuid.uuid4().hex}" if fresh_ids else None
            return call("post_message", {"target_mailbox": SINK, "payload": {"order": order}}, call_id=call_id)
        if kill:
            [post] = [c for m in request.messages for c in m.tool_calls if c.name == "post_message"]
            emit("KILLED " + json.dumps({"message_id": posted[-1]["message_id"], "call_id": post.id}))
            os.kill(os.getpid(), signal.SIGKILL)
        return respond(f"posted {order} as {posted[-1]['message_id']}")

    def factory(_crew: Any) -> CrewBlueprint:
        agent = Agent("a", (ProviderLike if fresh_ids else ScriptedModel)(policy=policy))
        return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))

    return factory


def main() -> None:
    db, phase, ids = sys.argv[1:4]
    rt = ok.Runtime.start(store=db)
    sink = rt.hub.register_mailbox(SINK)
    sup = CrewSupervisor(rt, factories={"poster": crew(kill=phase == "kill", fresh_ids=ids == "fresh")})
    if phase == "kill":
        sup.spawn("poster", "p1", checkpoint=True)
        wait_until(lambda: sup.durable("p1") and sup.status("p1") is CrewStatus.WAITING, what="p1 checkpointed")
        rt.hub.bind("shop", "desk").post("agent://p1/a", {"n": 7})
        wait_until(lambda: False, timeout=30, what="the model's SIGKILL")
    if sup.outcome("p1") is None and sup.status("p1") is None:
        sup.wake("p1")
    outcome = sup.wait_finished("p1", timeout=30)
    sent = rt.hub.bind("p1", "a").sent()
    result = {
        "status": outcome.status.value,
        "result": outcome.result,
        "failure": outcome.failure,
        "sink": [m.json() for m in sink.close()],
        "sent": [[row.to.id, row.idempotency_key] for row in sent.rows],
    }
    emit("RESULT " + json.dumps(result))
    sup.stop()
    rt.stop()


if __name__ == "__main__":
    main()
