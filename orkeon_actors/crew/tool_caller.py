"""Who runs an ``async`` user tool call: :func:`current_tool_caller`.

An async tool's function receives its arguments only; a tool that acts on the caller's
behalf outside the crew (the A2A ``ask_agent`` tool checks the caller's ``links:``) reads
the caller here. The crew sets it in the tool's own asyncio task
(:mod:`~orkeon_actors.crew.tool_calls`), so it is the crew and agent whose call runs,
never one the tool was configured with: a tool handed to another crew's agent acts as
that crew. Outside such a call it is ``None``.
"""

from __future__ import annotations

from contextvars import ContextVar

import attrs

from orkeon_actors.model.ids import AgentId, CrewId

__all__ = ["ToolCaller", "current_tool_caller", "set_tool_caller"]


@attrs.frozen
class ToolCaller:
    """The crew (id and ``name``, the ACL identity when it has one) and agent running an
    async tool call, and the hub the crew runs on."""

    crew_id: CrewId
    agent_id: AgentId
    crew_name: str | None
    hub: object = attrs.field(eq=False, repr=False)


_CALLER: ContextVar[ToolCaller | None] = ContextVar("orkeon_tool_caller", default=None)


def current_tool_caller() -> ToolCaller | None:
    """The caller of the async tool call running in this asyncio task, else ``None``."""
    return _CALLER.get()


def set_tool_caller(caller: ToolCaller) -> None:
    """Set the caller for the rest of the current task (the crew does, per call)."""
    _CALLER.set(caller)
