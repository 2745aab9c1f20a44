"""The ``ask_agent`` tool: an agent of a crew calls an external A2A agent.

::

    rt = ok.Runtime.start(middleware=[AclMiddleware(registry)], a2a_agents={"weather": url})
    agent = Agent("planner", model, tools=[rt.a2a_agents_tool()])

Arguments (JSON): ``agent`` (a configured name), ``message`` (the text to send) and,
to answer a remote task that asked for input, ``task_id`` (from the result that asked).
The tool's description lists each agent with its card's description and skills (read
from its card when the tool is made).

The call is an ``async`` tool: the calling agent parks while the remote agent works and
no thread is held (``docs/crews.md``, "The agent loop"). Its result, or its error result
(``{"error": {"type", "message"}}``) — what the model reads:

* ``completed``: ``answer`` (the artifacts' text), ``artifacts``, and ``events`` (what a
  streaming agent sent on the way, in order);
* ``input-required``: ``question`` and ``task_id``: calling ``ask_agent`` again with that
  ``task_id`` and the answer continues the same remote task;
* ``RemoteAgentFailedError`` (failed, rejected, canceled, auth-required),
  ``RemoteAgentTimeoutError``, ``RemoteAgentUnavailableError``, ``EventAclError`` (the
  crew's ``links:`` do not let it call the agent, or do not let the answer back: the
  link must be ``bidirectional``), ``ToolValidationError`` (bad arguments).

The ACL is checked for the crew and agent that run the call
(:func:`~orkeon_actors.crew.tool_caller.current_tool_caller`), before the call and again
when the answer arrives. Called outside a crew's agent on a runtime with an ACL stage,
the tool refuses: it has nobody to check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from a2a.types import AgentCard

from orkeon_actors.a2a.client.gate import A2AGate
from orkeon_actors.a2a.client.remote import RemoteAgents
from orkeon_actors.crew.agent import Tool
from orkeon_actors.crew.tool_caller import current_tool_caller
from orkeon_actors.errors import EventAclError, ToolValidationError
from orkeon_actors.model.address import MailboxAddress

__all__ = ["ASK_AGENT", "ask_agent_tool", "describe_agents"]

ASK_AGENT = "ask_agent"
"""The tool's name."""


def describe_agents(cards: Mapping[str, AgentCard]) -> str:
    """The tool's description: what it does, then each agent with its card's
    description and skills."""
    lines = [
        "Ask an external agent (over the Agent2Agent protocol) and get its answer. If the result's state "
        "is input-required, answer its question by calling ask_agent again with its task_id. The agents:"
    ]
    for name, card in cards.items():
        about = card.description.strip() or card.name
        lines.append(f"- {name}: {about}")
        for skill in card.skills:
            detail = f": {skill.description.strip()}" if skill.description.strip() else ""
            examples = f" (e.g. {'; '.join(skill.examples[:2])})" if skill.examples else ""
            lines.append(f"  - skill {skill.name or skill.id}{detail}{examples}")
    return "\n".join(lines)


def _schema(names: Iterable[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "agent": {"type": "string", "enum": list(names), "description": "Which agent to ask."},
            "message": {"type": "string", "minLength": 1, "description": "What to ask or tell it."},
            "task_id": {
                "type": "string",
                "description": "Only to answer a task that asked for input: the task_id of that result.",
            },
        },
        "required": ["agent", "message"],
        "additionalProperties": False,
    }


def _arguments(arguments: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str, str, str | None]:
    unknown = set(arguments) - {"agent", "message", "task_id"}
    if unknown:
        raise ToolValidationError(
            f"unknown argument(s) {sorted(unknown)}: ask_agent takes agent, message and task_id",
            field=sorted(unknown)[0],
        )
    agent = arguments.get("agent")
    if agent not in names:
        raise ToolValidationError(f"agent must be one of {list(names)}, got {agent!r}", field="agent")
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ToolValidationError("message must be a non-empty string: what to ask the agent", field="message")
    task_id = arguments.get("task_id")
    if task_id is not None and (not isinstance(task_id, str) or not task_id):
        raise ToolValidationError(
            "task_id must be the task_id string of a result that asked for input", field="task_id"
        )
    return agent, message, task_id


def ask_agent_tool(agents: RemoteAgents, gate: A2AGate, names: Iterable[str] | None = None) -> Tool:
    """The ``ask_agent`` :class:`~orkeon_actors.crew.agent.Tool` for ``names`` (default:
    every configured agent). Blocks while it reads their cards (at most each agent's
    timeout); raises :class:`~orkeon_actors.errors.RemoteAgentError` when a card cannot
    be read and ``UnknownRemoteAgentError`` for a name not configured."""
    chosen = tuple(agents.names if names is None else names)
    if not chosen:
        raise ToolValidationError("ask_agent needs at least one configured A2A agent: configure a2a_agents first")
    cards = {name: agents.card(name) for name in chosen}

    async def ask_agent(arguments: Mapping[str, Any]) -> dict[str, Any]:
        name, message, task_id = _arguments(arguments, chosen)
        caller = current_tool_caller()
        if gate.policy is not None:
            if caller is None:
                raise EventAclError(
                    "ask_agent runs as an agent's tool call on a runtime with an ACL stage: give it to an agent "
                    "(Agent(..., tools=[...])) so the ACL knows whose links to check",
                    target=f"a2a://{name}",
                    rule="a2a-no-caller",
                )
            gate.outbound(caller.crew_id, caller.agent_id, name)
            gate.inbound(name, MailboxAddress.agent(caller.crew_id, caller.agent_id))
        result = await agents.ask(name, message, task_id=task_id)
        if caller is not None:  # the links may have changed while the agent worked
            gate.inbound(name, MailboxAddress.agent(caller.crew_id, caller.agent_id))
        return result

    return Tool(ASK_AGENT, describe_agents(cards), ask_agent, _schema(chosen))
