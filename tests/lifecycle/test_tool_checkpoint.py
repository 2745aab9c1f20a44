"""A supervised crew on a durable store checkpoints its agent's conversation before the
hub side-effect tool calls its model answered run (``docs/crews.md``, "Crashes: what is
replayed"): the crash test is ``tests/crew/test_crash_replay.py``; these check what the
checkpoint holds and who pays for it."""

from __future__ import annotations

from typing import Any

import orkeon_actors as ok
from orkeon_actors.crew import (
    Agent,
    CrewSnapshot,
    CrewStatus,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    call,
    respond,
)
from orkeon_actors.lifecycle import CrewBlueprint
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.store import faults

from .conftest import Env

SINK = "agent://sink/s"


class ProviderLike(ScriptedModel):
    """A model that, like a real provider, does not replay identically: its crew takes
    the checkpoint before a post."""

    replays_identically = False


def _crew(
    first: ModelResponse, seen: list[CrewSnapshot | None], rt: list[ok.Runtime], model: type[ScriptedModel]
) -> Any:
    """One agent: ``first``, then (asked with its result) it records the crew's stored
    snapshot in ``seen`` and answers."""

    def policy(request: ModelRequest) -> ModelResponse:
        if not any(m.role == "tool" for m in request.messages):
            return first
        seen.append(rt[0].lifecycle_backend().states.load(ok.CrewId("c1")))
        return respond("done")

    agent = Agent("a", model(policy=policy))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))


def _run(
    env: Env,
    first: ModelResponse,
    delivered: list[Any] | None = None,
    model: type[ScriptedModel] = ProviderLike,
) -> CrewSnapshot | None:
    seen: list[CrewSnapshot | None] = []
    runtimes: list[ok.Runtime] = []
    env.factories["c"] = lambda _: _crew(first, seen, runtimes, model)
    sup = env.boot()
    assert env.rt is not None
    runtimes.append(env.rt)
    sink = env.hub.register_mailbox(SINK)
    sup.spawn("c", "c1")
    assert sup.wait_finished("c1", timeout=30).status is CrewStatus.COMPLETED
    if delivered is not None:
        delivered.extend(m.json() for m in sink.close())
    [stored] = seen
    return stored


def test_the_conversation_is_durable_before_a_post_message_runs(env: Env) -> None:
    post = call("post_message", {"target_mailbox": SINK, "payload": 1}, call_id="call_x1")
    stored = _run(env, post)
    assert stored is not None  # a crew that never slept: only the checkpoint wrote it
    [agent] = stored.agents
    assert agent.status.value == "running" and [c.id for c in agent.queued_calls] == ["call_x1"]
    assert agent.conversation[-1].role == "assistant" and agent.conversation[-1].tool_calls[0].id == "call_x1"


def test_a_turn_without_a_hub_side_effect_takes_no_checkpoint(env: Env) -> None:
    publish = call("publish_event", {"topic": "x", "payload": 1})
    assert _run(env, publish) is None  # no snapshot: nothing to replay twice


def test_a_model_that_replays_identically_pays_no_checkpoint_before_its_post(env: Env) -> None:
    """A scripted model answers a replay with the same call ids: the derived keys alone
    make the replayed post the original (tests/crew/test_crash_replay.py, ``stable``),
    so its crew's posting turns cost no snapshot write."""
    post = call("post_message", {"target_mailbox": SINK, "payload": 1}, call_id="call_x1")
    delivered: list[Any] = []
    assert _run(env, post, delivered, model=ScriptedModel) is None
    assert delivered == [1]


def test_a_checkpoint_that_never_commits_still_runs_the_held_post_once(env: Env) -> None:
    """Every snapshot save fails: the ``Resume`` after the failure runs the held call
    (the agent is never left held), its post is made once and it answers (the window
    docs/crews.md names)."""
    saves: list[str] = []

    def fail_saves(point: str) -> None:
        if point == "lifecycle.save":
            saves.append(point)
            raise OSError("disk full (injected)")

    faults.install(fail_saves)
    try:
        post = call("post_message", {"target_mailbox": SINK, "payload": 1})
        delivered: list[Any] = []
        assert _run(env, post, delivered) is None  # nothing committed
    finally:
        faults.uninstall()
    assert saves  # a checkpoint was tried
    assert delivered == [1]
