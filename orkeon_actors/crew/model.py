"""The ``Model`` protocol an agent asks for its next step, and ``ScriptedModel``.

A model takes the conversation and the tool definitions and returns either text (the
agent's answer for its current task) or tool calls, plus token usage. A real LLM plugs in
through the same protocol; :class:`ScriptedModel` drives tests and simulations
deterministically.

Everything here is a frozen attrs value: a conversation is data, so a parked agent can
be snapshotted and resumed elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import attrs

__all__ = [
    "AnyModel",
    "AsyncModel",
    "ChatMessage",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ScriptedModel",
    "ScriptExhaustedError",
    "ToolCall",
    "Usage",
    "respond",
    "call",
]

Role = Literal["system", "user", "assistant", "tool"]


def _json_text(value: object) -> str:
    if isinstance(value, str):
        json.loads(value)  # must already be JSON text
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@attrs.frozen
class ToolCall:
    """One tool call a model asked for. ``arguments`` is JSON text (as LLM APIs deliver
    it); a mapping given at construction is encoded."""

    id: str
    name: str
    arguments: str = attrs.field(default="{}", converter=_json_text)

    def parsed_arguments(self) -> Any:
        return json.loads(self.arguments)


@attrs.frozen
class Usage:
    """Token usage and cost of one model call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _tool_calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


@attrs.frozen
class ChatMessage:
    """One conversation entry: ``system`` / ``user`` / ``assistant`` (text and/or tool
    calls) / ``tool`` (a tool result, JSON text, answering ``tool_call_id``)."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    tool_call_id: str | None = None
    name: str | None = None


@attrs.frozen
class ModelResponse:
    """What a model returns: ``tool_calls`` to run (in order), or, when there are none,
    ``text`` as the agent's answer to its current task. ``finish_reason`` and
    ``response_model`` are what the provider said (why it stopped, which model
    answered), when it said so: they go to the agent events, not to the agent."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    usage: Usage = Usage()
    finish_reason: str | None = None
    response_model: str | None = None


@attrs.frozen
class ModelRequest:
    """What a model is asked: the agent's identity and instructions, the conversation so
    far, and the tool definitions it may call. ``turn`` counts this task's model calls
    (0 for the first)."""

    crew_id: str
    agent_id: str
    role: str
    instructions: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    turn: int = 0

    @property
    def last(self) -> ChatMessage | None:
        return self.messages[-1] if self.messages else None

    def last_tool_result(self) -> Any:
        """The decoded JSON of the latest tool result, or ``None``."""
        for message in reversed(self.messages):
            if message.role == "tool":
                return json.loads(message.content)
            if message.role == "user":
                return None
        return None

    @property
    def task(self) -> str:
        """The text of the latest ``user`` message (the current task's prompt)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""


@runtime_checkable
class Model(Protocol):
    """Anything that can choose an agent's next step.

    ``complete`` may raise, and the agent then fails with that error as its cause (its
    crew is marked failed). How it runs depends on its form (``docs/models.md``):

    * ``async def complete(self, request)`` (a coroutine function): awaited on the
      runtime's I/O loop; the agent parks meanwhile and its crew serves its other
      agents, so many calls are in flight without a thread each;
    * ``def complete`` on a model with ``blocking = True`` (a synchronous model doing
      I/O): run on the I/O loop's bounded executor, the agent parked the same way;
    * a plain ``def complete``: called on the crew actor's thread (a model that does no
      I/O, such as :class:`ScriptedModel`; simulations stay deterministic).

    :class:`AsyncModel` types the async form.
    """

    def complete(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class AsyncModel(Protocol):
    """A :class:`Model` whose ``complete`` is a coroutine function: awaited on the
    runtime's I/O loop while its agent is parked (``docs/models.md``)."""

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


AnyModel = Model | AsyncModel
"""What an agent may be given as its model."""


class ScriptExhaustedError(RuntimeError):
    """A :class:`ScriptedModel` was asked for more steps than its script holds."""


def respond(text: str, *, tokens: int = 10, cost: float = 0.0) -> ModelResponse:
    """A scripted final answer."""
    return ModelResponse(text=text, usage=Usage(tokens, 0, cost))


def call(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    tokens: int = 10,
    cost: float = 0.0,
    call_id: str | None = None,
) -> ModelResponse:
    """A scripted response making one tool call (its id is deterministic per agent turn
    when the model assigns it; see :class:`ScriptedModel`)."""
    return ModelResponse(
        tool_calls=(ToolCall(call_id or "", name, dict(arguments or {})),), usage=Usage(tokens, 0, cost)
    )


Policy = Callable[[ModelRequest], ModelResponse]


class ScriptedModel:
    """A deterministic model: a fixed ``script`` of responses, or a ``policy`` function.

    * ``ScriptedModel([call("receive_message", {...}), respond("done")])`` returns the
      script's responses in order. The position is *derived from the conversation* (the
      number of assistant turns so far), so the model holds no state of its own and a
      restored agent resumes at the right step. With ``per_task=True`` the script
      restarts for each task (the position counts assistant turns since the latest task
      prompt). Asking past the end raises :class:`ScriptExhaustedError`.
    * ``ScriptedModel(policy=fn)`` calls ``fn(request)`` for each step.

    Tool calls without an id get ``call-{turn}-{index}``, deterministic across runs.

    ``latency`` (seconds, default 0) simulates a model's call time: the agent parks and
    its answer arrives that long after it asked, on the runtime's clock (virtual in a
    simulation, where concurrent calls overlap in virtual time); 0 answers inline.

    :attr:`replays_identically` is true: asked again with the same conversation, a
    scripted model answers the same calls with the same ids (a policy must be a
    deterministic function of the request, as a simulation already needs), so a crew
    restored after a crash re-derives each hub call's idempotency key without a
    checkpoint before its posts (``docs/crews.md``, "Crashes: what is replayed").
    """

    model = "scripted"
    provider = "scripted"
    replays_identically: ClassVar[bool] = True

    def __init__(
        self,
        script: Sequence[ModelResponse | str] | None = None,
        *,
        policy: Policy | None = None,
        per_task: bool = False,
        latency: float = 0.0,
    ) -> None:
        if (script is None) == (policy is None):
            raise ValueError("give ScriptedModel exactly one of a script or a policy")
        if isinstance(latency, bool) or not isinstance(latency, int | float) or not 0 <= latency < float("inf"):
            raise ValueError(f"latency must be a number of seconds >= 0, got {latency!r}")
        self.latency = float(latency)
        self.script: tuple[ModelResponse, ...] = tuple(
            respond(item) if isinstance(item, str) else item for item in (script or ())
        )
        self.policy = policy
        self.per_task = per_task

    def complete(self, request: ModelRequest) -> ModelResponse:
        position = _assistant_turns(request.messages, since_task=self.per_task)
        if self.policy is not None:
            response = self.policy(request)
        else:
            if position >= len(self.script):
                raise ScriptExhaustedError(
                    f"agent {request.agent_id} asked for step {position + 1} but its script has "
                    f"{len(self.script)} steps; end the script with a text response"
                )
            response = self.script[position]
        return _with_call_ids(response, _assistant_turns(request.messages, since_task=False))


def _assistant_turns(messages: Sequence[ChatMessage], *, since_task: bool) -> int:
    count = 0
    for message in reversed(messages) if since_task else messages:
        if since_task and message.role == "user":
            break
        if message.role == "assistant":
            count += 1
    return count


def _with_call_ids(response: ModelResponse, turn: int) -> ModelResponse:
    if all(c.id for c in response.tool_calls):
        return response
    calls = tuple(c if c.id else attrs.evolve(c, id=f"call-{turn}-{i}") for i, c in enumerate(response.tool_calls))
    return attrs.evolve(response, tool_calls=calls)
