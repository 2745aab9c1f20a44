"""Autonomous: agents spawn sub-agents through a ``delegate`` tool, within a depth limit
and a per-agent budget (spec §8.2: tree of spawned agents, one BudgetSnapshot per agent,
current depth, delegations whose answer has not arrived).

A ``delegate`` call parks the caller (no thread), spawns a sub-agent whose model comes
from ``model_factory(role, depth)``, and gives it the task; the sub-agent's answer is
injected as the tool result ``{"agent_id", "output"}``. A call that would exceed
``max_depth`` or ``max_agents`` gets an error result the model can read. The root's
answer is the crew's result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from orkeon_actors.crew.agent import Agent, BudgetLimits
from orkeon_actors.crew.model import Model, ToolCall
from orkeon_actors.crew.orchestration import PARKED, Orchestration
from orkeon_actors.crew.orchestration_state import AgentNode, AgentTree, AutonomousState, PendingDelegation
from orkeon_actors.model.ids import AgentId

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor
    from orkeon_actors.crew.state import AgentState

__all__ = ["Autonomous", "DELEGATE_TOOL"]

DELEGATE_TOOL: dict[str, Any] = {
    "name": "delegate",
    "description": "Spawn a sub-agent with a role and give it a task; its answer is returned as this call's result.",
    "input_schema": {
        "type": "object",
        "properties": {"role": {"type": "string"}, "task": {"type": "string"}},
        "required": ["role", "task"],
        "additionalProperties": False,
    },
}


class Autonomous(Orchestration):
    mode = "autonomous"

    def __init__(
        self,
        root: str,
        task: str,
        *,
        model_factory: Callable[[str, int], Model],
        max_depth: int = 2,
        max_agents: int = 16,
        sub_agent_budget: BudgetLimits | None = None,
    ) -> None:
        self.root = AgentId(root)
        self.task = task
        self.model_factory = model_factory
        self.max_depth, self.max_agents = max_depth, max_agents
        self.sub_agent_budget = sub_agent_budget or BudgetLimits()

    def agent_ids(self) -> Sequence[AgentId]:
        return [self.root]

    def initial_state(self) -> AutonomousState:
        return AutonomousState(AgentTree((AgentNode(self.root, None, 0, "root"),)))

    def start(self, crew: CrewActor) -> None:
        crew.assign(self.root, "root", self.task)

    def tool_definitions(self, agent_id: AgentId) -> list[Mapping[str, Any]]:
        return [DELEGATE_TOOL]

    def _state(self, crew: CrewActor) -> AutonomousState:
        return crew.orchestration  # type: ignore[return-value]

    def on_tool_call(self, crew: CrewActor, agent_id: AgentId, call: ToolCall) -> dict[str, Any] | None:
        if call.name != "delegate":
            return None
        state = self._state(crew)
        try:
            args = call.parsed_arguments()
            role, task = str(args["role"]), str(args["task"])
        except (ValueError, KeyError, TypeError):
            return _error("ToolValidationError", 'delegate needs {"role": string, "task": string}', None)
        depth = state.spawned.depth_of(agent_id) + 1
        if depth > self.max_depth:
            return _error(
                "DelegationLimitError", f"cannot delegate beyond depth {self.max_depth}; do the task yourself", None
            )
        if len(state.spawned.nodes) >= self.max_agents:
            return _error(
                "DelegationLimitError", f"the crew already has {self.max_agents} agents; do the task yourself", None
            )
        child = AgentId(f"{agent_id}.{len(state.spawned.nodes)}")
        crew.add_agent(Agent(child, self.model_factory(role, depth), role=role, budget=self.sub_agent_budget))
        delegation = PendingDelegation(f"d-{child}", agent_id, child, task, call.id)
        state = AutonomousState(
            AgentTree((*state.spawned.nodes, AgentNode(child, agent_id, depth, role))),
            state.budgets,
            max(state.current_depth, depth),
            (*state.pending, delegation),
        )
        crew.set_orchestration(state, f"{agent_id} delegates to {child} (depth {depth})")
        crew.defer(lambda: crew.assign(child, delegation.delegation_id, task))
        return PARKED  # type: ignore[no-any-return]

    def on_task_done(self, crew: CrewActor, agent_id: AgentId, task_id: str, output: str) -> None:
        state = self._state(crew)
        budgets = {**state.budgets, agent_id: crew.agent_state(agent_id).budget}
        if task_id == "root":
            crew.set_orchestration(attrs.evolve(state, budgets=budgets), "root answered")
            crew.complete(output)
            return
        delegation = next(d for d in state.pending if d.delegation_id == task_id)
        pending = tuple(d for d in state.pending if d is not delegation)
        crew.set_orchestration(
            attrs.evolve(state, budgets=budgets, pending=pending), f"{agent_id} answered {delegation.parent}"
        )
        parent, call_id = delegation.parent, delegation.call_id
        crew.defer(lambda: crew.resume_with(parent, call_id, {"agent_id": str(agent_id), "output": output}))

    def restore_agent(self, crew: CrewActor, state: AgentState) -> Agent:
        """A spawned sub-agent, recreated from the tree (its model from ``model_factory``)."""
        node = next((n for n in self._state(crew).spawned.nodes if n.agent_id == state.agent_id), None)
        if node is None:
            return super().restore_agent(crew, state)
        return Agent(
            node.agent_id, self.model_factory(node.role, node.depth), role=node.role, budget=self.sub_agent_budget
        )


def _error(kind: str, message: str, field: str | None) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "field": field}}
