"""A remote A2A agent for the tests: a bare ``a2a-sdk`` server (its own
``DefaultRequestHandler``, JSON-RPC routes and agent card) with an ``AgentExecutor`` of
ours, served by uvicorn on a loopback port in a thread.

What it does with the text it receives (the first word decides):

* ``hello ...``: one artifact ``hi: <text>``, completed;
* ``stream``: two working updates (``step 1``, ``step 2``), an artifact sent in two
  chunks (``part A`` then ``part B`` appended), completed;
* ``ask``: input-required (``which city?``); the answer continues the same task, which
  completes with ``forecast for <answer>``;
* ``fail``: failed (``no forecast today``);
* ``slow``: working, then waits until cancelled (``cancelled`` is set by the SDK's
  cancel call).

``received`` counts the messages it got.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette

from orkeon_actors.testing import wait_until


class WeatherExecutor(AgentExecutor):
    def __init__(self) -> None:
        self.received = 0
        self.started_slow = threading.Event()
        self.cancelled = threading.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.received += 1
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def say(words: str):
            return updater.new_agent_message([new_text_part(words)])

        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"forecast for {text}")], name="forecast")
            await updater.complete()
        elif text.startswith("hello"):
            await updater.add_artifact([new_text_part(f"hi: {text}")], name="greeting")
            await updater.complete()
        elif text == "stream":
            await updater.update_status(TaskState.TASK_STATE_WORKING, say("step 1"))
            await updater.update_status(TaskState.TASK_STATE_WORKING, say("step 2"))
            await updater.add_artifact([new_text_part("part A")], artifact_id="a1", name="report")
            await updater.add_artifact([new_text_part(" part B")], artifact_id="a1", name="report", append=True)
            await updater.complete()
        elif text == "ask":
            await updater.requires_input(say("which city?"))
        elif text == "fail":
            await updater.failed(say("no forecast today"))
        elif text == "slow":
            await updater.start_work()
            self.started_slow.set()
            await asyncio.Event().wait()
        else:
            await updater.failed(say(f"unknown request {text!r}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.set()
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RemoteAgentServer:
    def __init__(self, url: str, executor: WeatherExecutor) -> None:
        self.url = url
        self.executor = executor


@contextmanager
def serve_remote_agent() -> Iterator[RemoteAgentServer]:
    """Run the weather agent on a loopback port until the block ends."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="weather",
        description="Weather forecasts for European cities",
        version="1.0",
        supported_interfaces=[AgentInterface(url=url + "/", protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="forecast",
                name="Forecast",
                description="Tomorrow's forecast for a city",
                tags=["weather"],
                examples=["forecast for Paris"],
            )
        ],
    )
    executor = WeatherExecutor()
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="test-a2a-agent", daemon=True)
    thread.start()
    wait_until(lambda: server.started, what="the test A2A agent to listen")
    try:
        yield RemoteAgentServer(url, executor)
    finally:
        server.should_exit = True
        thread.join(10)
