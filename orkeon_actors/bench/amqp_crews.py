"""The crews of ``orkeon bench amqp``'s wake and expiry figures: the lifecycle bench's
(one agent parked on ``receive_message``; what it receives is recorded in
:data:`~orkeon_actors.bench.lifecycle.DELIVERIES` of its host process), plus a kind whose
wait expires at one absolute instant for every crew of it."""

from __future__ import annotations

import time
from typing import Any

from orkeon_actors.bench.lifecycle import DELIVERIES, FACTORIES
from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint
from orkeon_actors.orchestration import Sequential, Task

__all__ = ["EXPIRING", "bench_factories"]

EXPIRING = "expiring"


def _expiring(at_unix_ms: int) -> CrewBlueprint:
    def policy(request: ModelRequest) -> ModelResponse:
        if request.turn == 0:
            return call("receive_message", {"timeout_ms": max(1, at_unix_ms - int(time.time() * 1000))})
        result = request.last_tool_result()
        DELIVERIES.record(request.crew_id, bool(isinstance(result, dict) and result.get("timed_out")))
        return respond("done")

    agent = Agent("a", ScriptedModel(policy=policy))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("wait", agent.agent_id)]))


def bench_factories(expire_at_ms: int | None = None) -> dict[str, Any]:
    """The lifecycle bench's kinds (``forever``, ``finite``) and, given ``expire_at_ms``,
    :data:`EXPIRING`: crews whose ``receive_message`` times out at that unix instant."""
    factories: dict[str, Any] = dict(FACTORIES)
    if expire_at_ms is not None:
        at = expire_at_ms
        factories[EXPIRING] = lambda _crew: _expiring(at)
    return factories
