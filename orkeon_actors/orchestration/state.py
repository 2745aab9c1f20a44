"""The six modes' ``OrchestrationState`` variants, beside the modes.

They are defined in :mod:`orkeon_actors.crew.orchestration_state`: a mode's progress is
part of the crew's snapshot, and the crew layer sits below the modes (a layer never
imports the one above it).
"""

from orkeon_actors.crew.orchestration_state import (
    MODES,
    AgentNode,
    AgentTree,
    AutonomousState,
    BranchState,
    ConsensualState,
    DelegationState,
    EdgeTransition,
    GraphState,
    HierarchicalState,
    JoinState,
    ManagerState,
    OrchestrationState,
    ParallelState,
    PendingDelegation,
    ProposalState,
    SequentialState,
    SubTask,
    TaskResult,
    Vote,
)

__all__ = [
    "MODES",
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
]
