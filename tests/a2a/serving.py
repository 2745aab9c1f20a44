"""Shared by the A2A serving tests: an exposed crew whose agent answers at once, asks
its caller, or waits, and the SDK's own client with a caller's token.

The model is registered as the provider ``a2a-echo`` (in this process, and in the
serving child of ``serve_child.py``): its first call receives the caller's message; the
message ``ask`` makes it post a question to its caller (``input-required``) and receive
the answer, ``ask-send`` asks with ``send_request``; either way it answers
``hello {answer}``; ``wait`` makes it wait for more mail, forever (cancel); anything else
is answered ``echo: {message}`` at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest, StreamResponse, Task

from orkeon_actors.config.model_registry import register_model_provider
from orkeon_actors.crew.model import ModelRequest, ModelResponse, ScriptedModel, call, respond

CREW_YAML = """
name: echo
description: Echoes what it is told, or asks the caller's name first.
agents:
  - id: answerer
    model: {provider: a2a-echo}
orchestration: {mode: sequential, tasks: [{description: answer the caller, agent: answerer}]}
links:
  - {to: "client:planner", direction: bidirectional}
a2a:
  skills:
    - {id: echo, name: Echo, description: Says back what it is told, tags: [test], examples: [hello]}
"""
TOKENS = {"planner": "planner-token-0123456789", "stranger": "stranger-token-0123456789"}


def _policy(request: ModelRequest) -> ModelResponse:
    result: Any = request.last_tool_result()
    if request.turn == 0:
        return call("receive_message", {"wait_forever": True})
    if request.turn == 1:
        message = result["message"]
        text = message["payload"]
        if text == "ask":  # durable: post the question, receive the answer
            caller = message["metadata"]["a2a_caller"]
            return call("post_message", {"target_mailbox": caller, "payload": "your name?"})
        if text == "ask-send":
            return call(
                "send_request",
                {"target_mailbox": message["metadata"]["a2a_caller"], "payload": "your name?", "timeout_ms": 3_600_000},
            )
        if text == "wait":
            return call("receive_message", {"wait_forever": True})
        return respond(f"echo: {text}")
    if request.turn == 2 and "message_id" in result:  # posted the question: wait for the answer
        return call("receive_message", {"wait_forever": True})
    if "message" in result:
        return respond(f"hello {result['message']['payload']}")
    if result.get("response_payload") is None:
        return respond(f"unexpected tool result: {result}")
    return respond(f"hello {result['response_payload']}")


register_model_provider("a2a-echo", lambda options, context: ScriptedModel(policy=_policy), replace=True)


async def final_task(events: AsyncIterator[StreamResponse]) -> Task:
    """The task of the last event of a non-streaming ``send_message``."""
    responses = [event async for event in events]
    assert responses and responses[-1].HasField("task"), responses
    return responses[-1].task


async def client_for(url: str, caller: str | None, *, streaming: bool = False) -> Client:
    """The SDK's client for the crew at ``url``, as ``caller`` (``None``: no token)."""
    headers = {} if caller is None else {"Authorization": f"Bearer {TOKENS[caller]}"}
    http = httpx.AsyncClient(headers=headers, timeout=30)
    return await create_client(url, ClientConfig(httpx_client=http, streaming=streaming))


def request(text: str, *, task_id: str = "", context_id: str = "", immediately: bool = False) -> SendMessageRequest:
    message = Message(
        message_id=f"m-{text}-{task_id}",
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(return_immediately=immediately))
