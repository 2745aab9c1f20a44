"""``Agent``: what an agent is (role, instructions, model, tools, budget limits).

An ``Agent`` is a definition; its progress is an :class:`~orkeon_actors.crew.state.AgentState`
owned by its crew actor, which runs the agent loop (ask the model, run the tool calls,
feed the results back) on the crew's thread. An agent never owns a thread: a wait tool
call parks it as data and the crew injects the result when the wait resolves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from orkeon_actors.crew.model import AnyModel
from orkeon_actors.crew.state import BudgetSnapshot
from orkeon_actors.model.ids import AgentId
from orkeon_actors.tools.waiting import WAITING_TOOLS

__all__ = ["Agent", "BudgetLimits", "Tool", "HUB_WAIT_TOOLS"]

HUB_WAIT_TOOLS = WAITING_TOOLS
"""The hub tools that wait: the agent parks on them instead of blocking a thread."""


@attrs.frozen
class BudgetLimits:
    """An agent's execution budget (spec §9.4): ``None`` means unlimited. Wall time runs
    on the runtime's clock (virtual in simulations) from the agent's first step."""

    max_tokens: int | None = None
    max_tool_calls: int | None = None
    max_wall_time: float | None = None
    max_cost: float | None = None

    def snapshot(self) -> BudgetSnapshot:
        return BudgetSnapshot(self.max_tokens, self.max_tool_calls, self.max_wall_time, self.max_cost)


@attrs.frozen
class Tool:
    """A user tool: ``fn(arguments)`` returns a JSON-serialisable result (a dict is
    passed to the model as is; anything else as ``{"result": value}``). An exception
    becomes an error result the model reads: ``{"error": {"type", "message", "field"}}``.
    An ``async def fn`` is awaited on the runtime's I/O loop while its agent is parked
    (``docs/crews.md``, "The agent loop").
    """

    name: str
    description: str
    fn: Callable[[Mapping[str, Any]], Any] = attrs.field(eq=False)
    input_schema: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object"}, eq=False)

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": dict(self.input_schema)}


def _agent_id(value: str) -> AgentId:
    return AgentId(value)


def _patterns(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        raise ValueError(f"volatile_cursors must be a collection of topic patterns, not one string: {value!r}")
    return frozenset(str(p) for p in value)


@attrs.frozen
class Agent:
    """An agent of a crew.

    * ``agent_id``: its id in the crew; its mailbox is ``agent://{crew}/{agent_id}``.
    * ``model``: the :class:`~orkeon_actors.crew.model.Model` (or
      :class:`~orkeon_actors.crew.model.AsyncModel`) that chooses its steps.
    * ``tools``: user tools, offered next to the seven hub tools (``hub_tools=False``
      withholds those).
    * ``budget``: limits; exhaustion cancels the agent's waits with
      ``BudgetExhaustedError`` and its crew records why.
    * ``max_turns``: model calls per task before the agent fails (a runaway script).
    * ``max_conversation``: keep at most this many messages of the conversation after
      its opening (the system instructions and the first task prompt, always kept): an
      agent that loops forever (``receive_message`` in a loop) then keeps a bounded
      conversation, in memory and in its snapshot. The oldest messages go first, before
      each model call, never leaving a tool result without the call it answers.
      ``None`` (the default) keeps everything.
    * ``max_cursors`` / ``max_buffered``: the memory bound of its ``wait_for_event``
      loop, as for the tools (:mod:`orkeon_actors.tools.cursors`): cursors per agent
      (least recently used closed first) and unread events per cursor (oldest dropped
      first, reported once as ``missed``).
    * ``volatile_cursors``: topic patterns of its ``wait_for_event`` cursors that opt
      out of durability (``durable=False``): under a supervisor on a durable store, the
      events a live crew's cursors match are kept in the store from the moment
      ``publish`` returns until a snapshot reflects them (one write per event, paid by
      the publisher), so a crash loses none; a cursor on one of these patterns holds
      them in memory only (faster to publish to; what it had not reflected in a
      snapshot is lost by a crash). A pattern is kept durably while any agent of the
      crew holds a durable cursor on it.
    """

    agent_id: AgentId = attrs.field(converter=_agent_id)
    model: AnyModel = attrs.field(eq=False)
    role: str = ""
    instructions: str = ""
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=tuple)
    budget: BudgetLimits = BudgetLimits()
    hub_tools: bool = True
    max_turns: int = 50
    max_conversation: int | None = None
    max_cursors: int = 16
    max_buffered: int = 10_000
    volatile_cursors: frozenset[str] = attrs.field(default=frozenset(), converter=_patterns)

    def __attrs_post_init__(self) -> None:
        keep = self.max_conversation
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 2):
            raise ValueError(
                f"agent {self.agent_id}: max_conversation must be None or an int of at least 2 (a call and its "
                f"result), got {keep!r}"
            )
        for name in ("max_cursors", "max_buffered"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"agent {self.agent_id}: {name} must be a positive int, got {value!r}")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"agent {self.agent_id} has two tools with the same name: {names}")


def agents_by_id(agents: Sequence[Agent]) -> dict[AgentId, Agent]:
    out: dict[AgentId, Agent] = {}
    for agent in agents:
        if agent.agent_id in out:
            raise ValueError(f"two agents share the id {agent.agent_id!r}; agent ids are unique within a crew")
        out[agent.agent_id] = agent
    return out
