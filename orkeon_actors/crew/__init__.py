"""Crews and agents: ``CrewActor``, ``Agent``, the ``Model`` protocol, budgets, snapshots.

See ``docs/crews.md``.
"""

from orkeon_actors.crew.agent import Agent, BudgetLimits, Tool
from orkeon_actors.crew.crew_actor import Activity, CrewActor, CrewObserver, EventBinding, query_crew, start_crew
from orkeon_actors.crew.finished import wait_finished
from orkeon_actors.crew.model import (
    ChatMessage,
    Model,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ScriptExhaustedError,
    ToolCall,
    Usage,
    call,
    respond,
)
from orkeon_actors.crew.snapshot import (
    SCHEMA_VERSION,
    CrewOutcome,
    CrewSnapshot,
    SnapshotVersionError,
    from_dict,
    from_json,
    register_migrator,
    to_dict,
    to_json,
)
from orkeon_actors.crew.state import (
    AgentState,
    AgentStatus,
    BudgetSnapshot,
    CrewFailure,
    CrewStatus,
    MailboxContent,
    OnMailbox,
    OnReply,
    OnTopic,
    PendingToolCall,
    PendingWait,
    TaskAssignment,
)

__all__ = [
    "SCHEMA_VERSION",
    "Activity",
    "Agent",
    "AgentState",
    "AgentStatus",
    "BudgetLimits",
    "BudgetSnapshot",
    "ChatMessage",
    "CrewActor",
    "CrewFailure",
    "CrewOutcome",
    "CrewObserver",
    "CrewSnapshot",
    "CrewStatus",
    "EventBinding",
    "MailboxContent",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OnMailbox",
    "OnReply",
    "OnTopic",
    "PendingToolCall",
    "PendingWait",
    "ScriptExhaustedError",
    "ScriptedModel",
    "SnapshotVersionError",
    "TaskAssignment",
    "Tool",
    "ToolCall",
    "Usage",
    "call",
    "from_dict",
    "from_json",
    "query_crew",
    "register_migrator",
    "respond",
    "start_crew",
    "to_dict",
    "to_json",
    "wait_finished",
]
