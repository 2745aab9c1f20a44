"""The data a crew is made of (spec §8.1, §8.3): agent states, budgets, pending waits.

Every class here is a frozen attrs value that round-trips through the snapshot converter
(:mod:`orkeon_actors.crew.snapshot`). Nothing here holds a thread, a lock or a callback:
a crew can be written down mid-wait and recomposed in another process.
"""

from __future__ import annotations

import enum
from datetime import datetime

import attrs

from orkeon_actors.crew.model import ChatMessage, ToolCall
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId
from orkeon_actors.model.message import FrozenMap, Message

__all__ = [
    "AgentState",
    "AgentStatus",
    "BudgetSnapshot",
    "CrewFailure",
    "CrewStatus",
    "MailboxContent",
    "OnMailbox",
    "OnReply",
    "OnTopic",
    "PendingToolCall",
    "PendingWait",
    "PendingWaitKind",
    "TaskAssignment",
    "TopicCursorState",
]


class AgentStatus(enum.Enum):
    IDLE = "idle"
    """No task: the crew watches the agent's mailbox and hands it what arrives."""
    RUNNING = "running"
    WAITING = "waiting_for_message"
    """Parked on a wait tool call (no thread held): resumes when the wait resolves."""
    DONE = "done"
    FAILED = "failed"


class CrewStatus(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    WAITING = "waiting_for_message"
    """Every agent is idle or parked: only a message or a timer can make progress."""
    COMPLETED = "completed"
    FAILED = "failed"


@attrs.frozen
class BudgetSnapshot:
    """An agent's budget as data (spec §9.4): limits (``None`` = unlimited) and usage.
    ``exhausted_reason`` says which limit ran out, once one did."""

    max_tokens: int | None = None
    max_tool_calls: int | None = None
    max_wall_time: float | None = None
    max_cost: float | None = None
    tokens_used: int = 0
    tool_calls_used: int = 0
    wall_time_used: float = 0.0
    cost_used: float = 0.0
    exhausted_reason: str | None = None


@attrs.frozen
class OnTopic:
    topic: str
    target_crew_scope: CrewId | None = None
    metadata_match: FrozenMap | None = None


@attrs.frozen
class OnMailbox:
    address: MailboxAddress


@attrs.frozen
class OnReply:
    correlation: CorrelationId


PendingWaitKind = OnTopic | OnMailbox | OnReply


@attrs.frozen
class PendingWait:
    """A wait in progress (spec §8.3). ``expires_at`` is ``None`` for FOREVER."""

    wait_id: str
    started_at: datetime
    expires_at: datetime | None
    kind: PendingWaitKind


@attrs.frozen
class PendingToolCall:
    """The tool call an agent is parked on: its result is injected when ``wait``
    resolves. ``delegation_id`` is set instead of ``wait`` for an autonomous delegation
    (the result is the sub-agent's answer)."""

    call: ToolCall
    wait: PendingWait | None = None
    delegation_id: str | None = None


@attrs.frozen
class TaskAssignment:
    """The task an agent is working on. ``origin`` says who gave it: ``orchestration``
    (the crew's mode; ``task_id`` is the mode's key) or ``message`` (mail that reached
    the agent while idle)."""

    task_id: str
    prompt: str
    origin: str = "orchestration"


@attrs.frozen
class TopicCursorState:
    """An agent's ``wait_for_event`` cursor as data (spec §5.2; see
    :mod:`orkeon_actors.tools.cursors`): its key (``topic`` pattern, ``metadata_match``),
    the messages it held and had not handed out yet (``buffered``, oldest first: handed
    out first after a restore), the drops not yet reported as ``missed``, and the ids of
    the messages it handed out last (``recent``: a message offered again, a wake's
    trigger say, is not handed out twice)."""

    topic: str
    metadata_match: FrozenMap | None = None
    buffered: tuple[Message, ...] = ()
    missed: int = 0
    recent: tuple[str, ...] = ()


@attrs.frozen
class AgentState:
    """Everything an agent is, as data: its conversation, its current task, the tool
    call it is parked on and the calls queued behind it, its budget, the messages the
    crew took from its mailbox while it was busy (``inbox``), its ``wait_for_event``
    cursors (least recently used first), and why it failed."""

    agent_id: AgentId
    role: str
    status: AgentStatus = AgentStatus.IDLE
    conversation: tuple[ChatMessage, ...] = ()
    task: TaskAssignment | None = None
    pending: PendingToolCall | None = None
    queued_calls: tuple[ToolCall, ...] = ()
    budget: BudgetSnapshot = BudgetSnapshot()
    inbox: tuple[Message, ...] = ()
    turns: int = 0
    failure: str | None = None
    cursors: tuple[TopicCursorState, ...] = ()


@attrs.frozen
class MailboxContent:
    """Messages held for one mailbox of the crew (spec §8.1)."""

    address: MailboxAddress
    messages: tuple[Message, ...] = ()


@attrs.frozen
class CrewFailure:
    """Why a crew failed: the error type and message, and the agent at fault (if any)."""

    error_type: str
    message: str
    agent_id: AgentId | None = None

    def __str__(self) -> str:
        where = f" (agent {self.agent_id})" if self.agent_id else ""
        return f"{self.error_type}{where}: {self.message}"
