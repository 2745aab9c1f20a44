"""``orkeon bench a2a``: an A2A round trip to a crew beside a bare ``a2a-sdk`` server.

Both servers run in this process on loopback HTTP, served by the same SDK (routes,
request handler, JSON-RPC) and called by the SDK's own client, one ``SendMessage`` at a
time (each answered with a completed task holding one text artifact):

* **ours**: ``Runtime.start(store=..., a2a=...)`` with a crew that answers at once (it
  receives the caller's message and answers), behind the bearer guard. Each round trip
  is a whole crew run: the caller admitted by the crew's ``links:``, a crew spawned
  under the supervisor, the message posted to it, its outcome made durable, the task
  saved in the store (``durability="normal"``, as a service on one machine would run).
* **bare**: the SDK's ``DefaultRequestHandler`` with an ``AgentExecutor`` that answers
  at once and the SDK's ``InMemoryTaskStore``: what the protocol itself costs.

Rounds alternate between the two (the machine's noise hits both alike); the best round
of each is kept. ``round_trip_vs_bare_sdk`` is ours over bare in round trips per second
(target >= 0.7, docs/bench.md).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import httpx
from a2a.client import ClientConfig, create_client
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState
from starlette.applications import Starlette

from orkeon_actors.a2a.server import A2AConfig
from orkeon_actors.a2a.server.card import agent_card
from orkeon_actors.a2a.server.server import listen, serve_in_thread
from orkeon_actors.bench.context import progress, scratch_directory
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.runtime import Runtime

__all__ = ["CREW_YAML", "run_a2a"]

CREW_YAML = """
name: instant
description: Answers at once.
agents:
  - id: answerer
    model: {provider: scripted, script: [{call: receive_message, arguments: {wait_forever: true}}, done]}
orchestration: {mode: sequential, tasks: [{description: answer the caller, agent: answerer}]}
links: [{to: "client:bench", direction: bidirectional}]
a2a: {skills: [{id: answer, description: answers at once, tags: [bench]}]}
"""
_TOKEN = "bench-token-0123456789abcdef"


class _Instant(AgentExecutor):
    """The bare server's agent: a completed task with one text artifact, at once."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        await event_queue.enqueue_event(
            Task(id=task_id, context_id=context_id, status={"state": TaskState.TASK_STATE_SUBMITTED})
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.add_artifact([Part(text="done")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


async def _round_trips(url: str, token: str | None, count: int) -> float:
    """Round trips per second of ``count`` sequential SendMessage calls to ``url``."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        client = await create_client(url, ClientConfig(httpx_client=http, streaming=False))
        started = time.perf_counter()
        for index in range(count):
            message = Message(message_id=f"b{index}", role=Role.ROLE_USER, parts=[Part(text="hi")])
            async for response in client.send_message(SendMessageRequest(message=message)):
                if response.task.status.state != TaskState.TASK_STATE_COMPLETED:
                    raise RuntimeError(f"bench round trip did not complete: {response}")
        return count / (time.perf_counter() - started)


def run_a2a(rounds: int, per_round: int) -> BenchResult:
    """Alternate ``rounds`` rounds of ``per_round`` round trips on each server."""
    directory = scratch_directory("orkeon-bench-a2a-")
    blueprint = CrewBlueprint.from_yaml(CREW_YAML)
    bare_socket = listen("127.0.0.1", 0)
    bare_url = f"http://127.0.0.1:{bare_socket.getsockname()[1]}/"
    card = agent_card(blueprint, bare_url)
    handler = DefaultRequestHandler(_Instant(), InMemoryTaskStore(), card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    bare, thread = serve_in_thread(app, bare_socket)
    try:
        with Runtime.start(
            store=Path(directory) / "a2a.db", durability="normal", a2a=A2AConfig(callers={"bench": _TOKEN})
        ) as runtime:
            assert runtime.a2a is not None
            url = runtime.a2a.expose(blueprint)
            asyncio.run(_round_trips(url, _TOKEN, 3))  # warm both paths up
            asyncio.run(_round_trips(bare_url, None, 3))
            ours: list[float] = []
            theirs: list[float] = []
            for index in range(rounds):
                progress(f"round {index + 1}/{rounds}")
                ours.append(asyncio.run(_round_trips(url, _TOKEN, per_round)))
                theirs.append(asyncio.run(_round_trips(bare_url, None, per_round)))
    finally:
        bare.should_exit = True
        thread.join(timeout=10)
        bare_socket.close()
        shutil.rmtree(directory, ignore_errors=True)
    best_ours, best_theirs = max(ours), max(theirs)
    return BenchResult(
        "a2a",
        {
            "crew_round_trips_per_s": best_ours,
            "bare_sdk_round_trips_per_s": best_theirs,
            "crew_round_trip_ms": 1000 / best_ours,
            "bare_sdk_round_trip_ms": 1000 / best_theirs,
            "round_trip_vs_bare_sdk": best_ours / best_theirs,
        },
        {
            "crew_round_trips_per_s": "/s",
            "bare_sdk_round_trips_per_s": "/s",
            "crew_round_trip_ms": "ms",
            "bare_sdk_round_trip_ms": "ms",
            "round_trip_vs_bare_sdk": "x",
        },
        f"SendMessage round trips over loopback HTTP with the SDK's client, {rounds} alternating rounds of "
        f"{per_round}, best round each; ours: a crew run per task on the SQLite store (durability normal)",
    )


@register("a2a")
def bench_a2a(quick: bool) -> BenchResult:
    return run_a2a(rounds=2 if quick else 5, per_round=20 if quick else 100)
