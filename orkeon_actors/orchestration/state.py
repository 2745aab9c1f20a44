"""The modes' progress as data lives with the crew (:mod:`orkeon_actors.crew.mode_state`:
a snapshot holds it, and the crew never imports the modes); this module keeps its names
importable from here."""

from orkeon_actors.crew.mode_state import (
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
