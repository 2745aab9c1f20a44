"""The crews of ``orkeon bench amqp``'s wake and expiry figures: the lifecycle bench's
(one agent parked on ``receive_message``; what it receives is recorded in
:data:`~orkeon_actors.bench.lifecycle.DELIVERIES` of its host process), plus a kind whose
wait expires at one absolute instant for every crew of it."""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable
from typing import Any

from orkeon_actors.bench.lifecycle import DELIVERIES, FACTORIES
from orkeon_actors.crew import Agent, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint
from orkeon_actors.orchestration import Sequential, Task

__all__ = ["EXPIRING", "HOST_OPS", "bench_factories"]

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


def _expect(state: Any, crews: list[str]) -> int:
    """Arm the delivery events of ``crews`` (before what delivers to them)."""
    expected: dict[str, threading.Event] = state.extra.setdefault("expected", {})
    with state.lock:
        for crew in crews:
            expected[crew] = DELIVERIES.expect(crew)
    return len(crews)


def _delivered(state: Any, crews: list[str], timeout: float = 60.0) -> dict[str, float]:
    """Wait until each of ``crews`` (armed by ``expect``) had its delivery; the
    ``time.perf_counter()`` of each (``CLOCK_MONOTONIC``: comparable across processes)."""
    expected: dict[str, threading.Event] = state.extra.setdefault("expected", {})
    deadline = time.monotonic() + timeout
    for crew in crews:
        with state.lock:
            event = expected.pop(crew)
        if not event.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"crew {crew} had no delivery within {timeout} s")
    with DELIVERIES.lock:
        return {crew: DELIVERIES.at[crew][0] for crew in crews}


def _inbox_batches(state: Any) -> list[int]:
    """``[batches, deliveries]`` the host's gateway handled on its inbox lane so far."""
    gateway = state.runtime.hub.gateway
    return [gateway.inbox_batches, gateway.inbox_deliveries]


def _switches(_state: Any) -> int:
    """Context switches (voluntary and involuntary) of every thread of this process so
    far, those that ended included (``getrusage``)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


HOST_OPS: dict[str, Callable[..., Any]] = {
    "expect": _expect,
    "delivered": _delivered,
    "inbox_batches": _inbox_batches,
    "switches": _switches,
}
"""The bench's probes, loaded into a host process with its ``load_ops`` op."""
