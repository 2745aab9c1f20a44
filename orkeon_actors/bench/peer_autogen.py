"""The peer rows of ``orkeon bench hub``: autogen-core's agent runtime, measured in the
same run and with the same tracing configuration as the hub.

autogen-core (0.7.5, the ``bench`` extra) is what users would pick instead of this
package for an in-process agent runtime. Its ``SingleThreadedAgentRuntime`` is given the
very ``TracerProvider`` the hub's telemetry stage uses (same sampler, same batch
processor and exporter), so both pay for the same spans. Its standard-library logging is
left as a production process has it (no handler below WARNING), as the hub's loguru sink
is at INFO.

* request/reply: one coroutine awaits ``send_message`` to a ``RoutedAgent`` that answers,
  N times in a row (the hub's counterpart: ``send`` / ``reply`` across two threads);
* one-way: N ``publish_message`` calls to a topic one agent subscribes to, timed until
  the runtime is idle (every message handled; the hub's counterpart: post→receive).

:func:`unavailable` says why the rows cannot run (autogen-core not installed) or
``None``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import TracerProvider

__all__ = ["AUTOGEN_VERSION", "one_way_per_second", "request_reply_per_second", "unavailable"]

AUTOGEN_VERSION = "0.7.5"


def unavailable() -> str | None:
    """Why the autogen-core rows cannot run here, or ``None`` when they can."""
    if importlib.util.find_spec("autogen_core") is None:
        return (
            f"autogen-core is not installed: the peer rows are skipped "
            f"(pip install -e '.[bench]' installs autogen-core {AUTOGEN_VERSION})"
        )
    from importlib.metadata import version

    installed = version("autogen-core")
    if installed != AUTOGEN_VERSION:
        return f"autogen-core {installed} is installed; the peer rows are measured against {AUTOGEN_VERSION} only"
    return None


async def _request_reply(requests: int, tracer_provider: TracerProvider, settle: Callable[[], None]) -> float:
    from autogen_core import AgentId, SingleThreadedAgentRuntime

    from orkeon_actors.bench.autogen_agents import Ping, Responder

    runtime = SingleThreadedAgentRuntime(tracer_provider=tracer_provider)
    await Responder.register(runtime, "responder", Responder)
    runtime.start()
    target = AgentId("responder", "default")
    started = time.perf_counter()
    for n in range(requests):
        reply: Any = await runtime.send_message(Ping(n), target)
        if reply.n != n:
            raise RuntimeError(f"autogen-core answered {reply!r} to request {n}")
    settle()
    elapsed = time.perf_counter() - started
    await runtime.stop_when_idle()
    return requests / elapsed


async def _one_way(messages: int, tracer_provider: TracerProvider, settle: Callable[[], None]) -> float:
    from autogen_core import AgentId, SingleThreadedAgentRuntime, TopicId, TypeSubscription

    from orkeon_actors.bench.autogen_agents import Counter, Ping

    runtime = SingleThreadedAgentRuntime(tracer_provider=tracer_provider)
    await Counter.register(runtime, "counter", Counter)
    await runtime.add_subscription(TypeSubscription("bench", "counter"))
    runtime.start()
    topic = TopicId("bench", "default")
    started = time.perf_counter()
    for n in range(messages):
        await runtime.publish_message(Ping(n), topic)
    await runtime.stop_when_idle()
    settle()
    elapsed = time.perf_counter() - started
    agent: Any = await runtime.try_get_underlying_agent_instance(AgentId("counter", "default"))
    if agent.received != messages:
        raise RuntimeError(f"autogen-core delivered {agent.received} of {messages} published messages")
    return messages / elapsed


def _nothing() -> None:
    return None


def request_reply_per_second(
    requests: int, tracer_provider: TracerProvider, settle: Callable[[], None] = _nothing
) -> float:
    """Round trips/s of autogen-core's ``send_message`` to an agent that answers;
    ``settle`` runs after the last reply, before the clock stops (as for the hub)."""
    return asyncio.run(_request_reply(requests, tracer_provider, settle))


def one_way_per_second(messages: int, tracer_provider: TracerProvider, settle: Callable[[], None] = _nothing) -> float:
    """Messages/s published to a topic and handled by one subscribed agent; ``settle``
    runs after the runtime is idle, before the clock stops."""
    return asyncio.run(_one_way(messages, tracer_provider, settle))
