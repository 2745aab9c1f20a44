"""``OrchestrationState``: one frozen variant per mode, fields as spec §8.2 lists them.

Each variant is exactly the mode's progress as data; the snapshot converter tags them by
``mode`` so a loader knows which one it reads.
"""

from __future__ import annotations

from typing import Any

import attrs

from orkeon_actors.crew.state import BudgetSnapshot
from orkeon_actors.model.ids import AgentId

__all__ = [
    "AgentNode",
    "AgentTree",
    "AutonomousState",
    "BranchState",
    "ConsensualState",
    "DelegationState",
    "EdgeTransition",
    "GraphState",
    "HierarchicalState",
    "JoinState",
    "ManagerState",
    "OrchestrationState",
    "ParallelState",
    "PendingDelegation",
    "ProposalState",
    "SequentialState",
    "SubTask",
    "TaskResult",
    "Vote",
    "MODES",
]


# -- Sequential ---------------------------------------------------------------------


@attrs.frozen
class TaskResult:
    """One finished task: who did it, what it was given and what it answered."""

    index: int
    agent_id: AgentId
    input: str
    output: str


@attrs.frozen
class SequentialState:
    current_task_index: int = 0
    completed: tuple[TaskResult, ...] = ()


# -- Hierarchical -------------------------------------------------------------------


@attrs.frozen
class SubTask:
    subtask_id: str
    worker: AgentId
    task: str


@attrs.frozen
class ManagerState:
    """``phase``: planning, delegating, aggregating, done. ``history`` is the manager's
    LLM exchange, truncated to its last entries."""

    phase: str = "planning"
    goal: str = ""
    plan: tuple[SubTask, ...] = ()
    history: tuple[str, ...] = ()


@attrs.frozen
class DelegationState:
    """A worker's in-progress sub-task (``None`` when idle) and its partial results."""

    in_progress: SubTask | None = None
    partial_results: tuple[TaskResult, ...] = ()


@attrs.frozen
class HierarchicalState:
    manager: ManagerState = ManagerState()
    workers: dict[AgentId, DelegationState] = attrs.field(factory=dict)


# -- Parallel -----------------------------------------------------------------------

BRANCH_STATUSES = ("NotStarted", "Running", "WaitingForMessage", "Done")


@attrs.frozen
class BranchState:
    agent_id: AgentId
    task: str
    status: str = "NotStarted"
    output: str | None = None


@attrs.frozen
class JoinState:
    """The join: ``policy`` all / any / quorum (``quorum`` branches), the
    ``aggregation`` applied to the partial results, and those results by branch."""

    policy: str = "all"
    quorum: int | None = None
    aggregation: str = "concat"
    partial_results: dict[str, str] = attrs.field(factory=dict)
    result: str | None = None


@attrs.frozen
class ParallelState:
    branches: dict[str, BranchState] = attrs.field(factory=dict)
    join: JoinState | None = None


# -- Consensual ---------------------------------------------------------------------


@attrs.frozen
class Vote:
    round: int
    agent_id: AgentId
    approve: bool
    reason: str = ""


@attrs.frozen
class ProposalState:
    """``status``: open, accepted, no_consensus."""

    text: str
    author: AgentId | None = None
    status: str = "open"


@attrs.frozen
class ConsensualState:
    round: int = 1
    cast_votes: tuple[Vote, ...] = ()
    proposal: ProposalState = ProposalState("")


# -- Graph --------------------------------------------------------------------------


@attrs.frozen
class EdgeTransition:
    source: str
    target: str
    cycle_count: int


@attrs.frozen
class GraphState:
    current_node: str
    state_vars: dict[str, Any] = attrs.field(factory=dict)
    cycle_count: int = 0
    history: tuple[EdgeTransition, ...] = ()


# -- Autonomous ---------------------------------------------------------------------


@attrs.frozen
class AgentNode:
    agent_id: AgentId
    parent: AgentId | None
    depth: int
    role: str


@attrs.frozen
class AgentTree:
    nodes: tuple[AgentNode, ...] = ()

    def depth_of(self, agent_id: str) -> int:
        for node in self.nodes:
            if node.agent_id == agent_id:
                return node.depth
        raise KeyError(agent_id)


@attrs.frozen
class PendingDelegation:
    """A sub-agent's task whose answer has not arrived; ``parent``'s tool call
    ``call_id`` is parked on it."""

    delegation_id: str
    parent: AgentId
    child: AgentId
    task: str
    call_id: str


@attrs.frozen
class AutonomousState:
    spawned: AgentTree = AgentTree()
    budgets: dict[AgentId, BudgetSnapshot] = attrs.field(factory=dict)
    current_depth: int = 0
    pending: tuple[PendingDelegation, ...] = ()


OrchestrationState = (
    SequentialState | HierarchicalState | ParallelState | ConsensualState | GraphState | AutonomousState
)

MODES: dict[str, type] = {
    "sequential": SequentialState,
    "hierarchical": HierarchicalState,
    "parallel": ParallelState,
    "consensual": ConsensualState,
    "graph": GraphState,
    "autonomous": AutonomousState,
}
"""The ``ProcessType`` of spec §8.1: mode name -> its state variant."""
