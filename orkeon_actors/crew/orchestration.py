"""The contract between a crew actor and its orchestration mode (the port the modes of
:mod:`orkeon_actors.orchestration` implement; it lives with the crew, which calls it).

A mode is a strategy object the crew actor calls on its own thread: ``start`` once, then
``on_task_done`` each time an agent answers a task the mode assigned, ``on_agent_status``
when an agent parks or resumes, ``on_agent_mail`` for mail that reaches an idle agent,
``on_tool_call`` for tools the mode itself offers (autonomous delegation). The mode's
progress lives only in ``crew.orchestration`` (an ``OrchestrationState`` variant), which
it replaces through ``crew.set_orchestration``: a mode object holds configuration, never
progress, so a restored crew continues from its snapshot.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from orkeon_actors.crew.model import ToolCall
from orkeon_actors.crew.orchestration_state import OrchestrationState
from orkeon_actors.crew.state import AgentStatus
from orkeon_actors.model.ids import AgentId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.crew.agent import Agent
    from orkeon_actors.crew.crew_actor import CrewActor
    from orkeon_actors.crew.state import AgentState

__all__ = ["Orchestration", "PARKED", "OrchestrationError"]


class _Parked:
    def __repr__(self) -> str:
        return "PARKED"


PARKED: Any = _Parked()
"""Returned by ``on_tool_call`` when the call's result will be injected later."""


class OrchestrationError(Exception):
    """A mode cannot go on (bad plan, runaway graph, no edge): the crew fails with it."""


class Orchestration(abc.ABC):
    """Base of the six modes."""

    mode: ClassVar[str]

    @abc.abstractmethod
    def agent_ids(self) -> Sequence[AgentId]:
        """The agents this mode needs (checked against the crew's agents at start)."""

    @abc.abstractmethod
    def initial_state(self) -> OrchestrationState: ...

    @abc.abstractmethod
    def start(self, crew: CrewActor) -> None: ...

    @abc.abstractmethod
    def on_task_done(self, crew: CrewActor, agent_id: AgentId, task_id: str, output: str) -> None: ...

    def on_agent_status(self, crew: CrewActor, agent_id: AgentId, status: AgentStatus) -> None:
        """An agent parked (``WAITING``) or resumed (``RUNNING``)."""
        return None

    def on_agent_mail(self, crew: CrewActor, agent_id: AgentId, message: Message) -> bool:
        """Mail reached idle ``agent_id``; return ``True`` if the mode consumed it."""
        return False

    def tool_definitions(self, agent_id: AgentId) -> list[Mapping[str, Any]]:
        """Extra tools this mode offers ``agent_id``."""
        return []

    def on_tool_call(self, crew: CrewActor, agent_id: AgentId, call: ToolCall) -> dict[str, Any] | None:
        """Run a tool this mode offers: its result, ``PARKED``, or ``None`` if not ours."""
        return None

    def restore_agent(self, crew: CrewActor, state: AgentState) -> Agent:
        """The definition of an agent a snapshot holds but the crew's factory did not
        declare (one this mode spawned at run time), for a wake. The base mode spawns
        none, so such an agent is an error: the factory must declare every agent."""
        raise OrchestrationError(
            f"the snapshot of crew {crew.crew_id} holds agent {state.agent_id!r}, which its crew factory does not "
            f"declare and the {self.mode} mode cannot recreate; declare it in the factory"
        )
