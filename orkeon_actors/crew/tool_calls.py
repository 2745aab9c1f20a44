"""An agent's call of an ``async`` user tool: parked while the tool runs on the runtime's
I/O loop, as a model call is (:mod:`~orkeon_actors.crew.model_calls`).

Plain functions of :class:`~orkeon_actors.crew.crew_actor.CrewActor`'s state, called
only in its turns. Guarantees:

* a :class:`~orkeon_actors.crew.agent.Tool` whose ``fn`` is a coroutine function is
  awaited on the I/O loop; the agent stays ``RUNNING`` (its crew does not sleep) and
  the crew serves its other agents meanwhile;
* its result (or the error result the model reads, for an exception of the tool) comes
  back as a :class:`ToolDone` actor message; a withdrawn call's is ignored;
* the call stays first in the agent's queued calls until it answers, so a crew restored
  meanwhile runs it again (like a model call, an async tool call is at least once);
* the agent's budget firing, or the crew stopping, cancels the tool's task;
* the tool reads who calls it with
  :func:`~orkeon_actors.crew.tool_caller.current_tool_caller`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from orkeon_actors.crew import model_calls
from orkeon_actors.crew.agent import Tool
from orkeon_actors.crew.agent_runtime import AgentRuntime, CallInFlight
from orkeon_actors.crew.mode import PARKED
from orkeon_actors.crew.model import ToolCall
from orkeon_actors.crew.tool_caller import ToolCaller, set_tool_caller
from orkeon_actors.errors import ToolValidationError
from orkeon_actors.model.ids import AgentId
from orkeon_actors.tools.waiting import error_result

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = ["ToolDone", "start", "tool_done"]


@attrs.frozen(eq=False)
class ToolDone:
    """The outcome of ``agent_id``'s tool call ``call`` (``token``): its result, or the
    error that fails the agent (its budget ran out)."""

    agent_id: AgentId
    token: object
    call: ToolCall
    outcome: Mapping[str, Any] | BaseException


def start(actor: CrewActor, runtime: AgentRuntime, tool: Tool, call: ToolCall) -> Any:
    """Run ``tool`` (an ``async`` one) on ``call`` on the I/O loop: ``PARKED``, or the
    error result of arguments that are not JSON."""
    try:
        arguments = call.parsed_arguments()
    except ValueError as exc:
        return error_result(ToolValidationError(f"the arguments are not valid JSON: {exc}"), None)
    token = object()
    agent_id = runtime.agent.agent_id
    caller = ToolCaller(actor.crew_id, agent_id, actor.crew_name, actor.hub)
    runtime.state = attrs.evolve(runtime.state, queued_calls=(call, *runtime.state.queued_calls))

    async def run() -> None:
        result: Mapping[str, Any]
        set_tool_caller(caller)  # this task's own context: seen by the tool only
        try:
            value = await tool.fn(arguments)
            result = dict(value) if isinstance(value, Mapping) else {"result": value}
        except Exception as exc:  # a broken user tool is a result the model reads, not a crash
            result = error_result(exc, getattr(exc, "field", None))
        actor.tell(ToolDone(agent_id, token, call, result))

    runtime.call = CallInFlight(actor.agent_io.loop.submit(run), token)
    model_calls.watch_budget(actor, runtime, lambda error: ToolDone(agent_id, token, call, error))
    return PARKED


def tool_done(actor: CrewActor, message: ToolDone) -> None:
    """A tool call's outcome: appended to the conversation and the agent runs on (or
    fails), unless the call was withdrawn meanwhile."""
    runtime = actor.runtimes.get(message.agent_id)
    if runtime is None or runtime.call is None or runtime.call.token is not message.token:
        return
    runtime.withdraw_call()
    outcome = message.outcome
    if isinstance(outcome, BaseException):
        actor.agent_failed(runtime, outcome)
    else:
        queued = runtime.state.queued_calls
        if queued and queued[0] == message.call:
            runtime.state = attrs.evolve(runtime.state, queued_calls=queued[1:])
        actor.append_tool_result(runtime, message.call, outcome)
        actor.run_agent(runtime)
    model_calls.start_queued(actor)
