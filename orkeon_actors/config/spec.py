"""The value types of a crew blueprint: agents, budgets, model references, the six
orchestration modes' configurations and the ``event:`` block.

Every type is a frozen attrs class whose field names are the schema's keys (``from`` /
``to`` of a graph edge are ``source`` / ``target`` here); :mod:`orkeon_actors.config.codec`
is the one converter between them and the canonical JSON document.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Literal, NewType

import attrs

from orkeon_actors.config.frozen import FrozenJson

__all__ = [
    "A2aSkillSpec",
    "A2aSpec",
    "AgentSpec",
    "AutonomousSpec",
    "BranchSpec",
    "BudgetSpec",
    "ConditionSpec",
    "ConsensualSpec",
    "CursorBounds",
    "EdgeSpec",
    "EventSpec",
    "GraphSpec",
    "JsonScalar",
    "HierarchicalSpec",
    "ModelRef",
    "OrchestrationSpec",
    "ParallelSpec",
    "PublishDecl",
    "Seconds",
    "SequentialSpec",
    "SubscribeDecl",
    "TaskSpec",
]

JsonScalar = str | int | float | bool | None
"""A JSON scalar (a graph condition's value)."""

Seconds = NewType("Seconds", float)
"""A duration in seconds (written ``30s`` / ``5m`` / ISO 8601 in documents)."""


@attrs.frozen(kw_only=True)
class BudgetSpec:
    """Execution limits (spec §9.4); ``None`` is unlimited."""

    max_tokens: int | None = None
    max_tool_calls: int | None = None
    max_wall_time: Seconds | None = None
    max_cost: float | None = None

    def under(self, default: BudgetSpec | None) -> BudgetSpec:
        """These limits, each unset one taken from ``default`` (the crew budget)."""
        if default is None:
            return self
        return BudgetSpec(
            max_tokens=self.max_tokens if self.max_tokens is not None else default.max_tokens,
            max_tool_calls=self.max_tool_calls if self.max_tool_calls is not None else default.max_tool_calls,
            max_wall_time=self.max_wall_time if self.max_wall_time is not None else default.max_wall_time,
            max_cost=self.max_cost if self.max_cost is not None else default.max_cost,
        )


@attrs.frozen(kw_only=True)
class ModelRef:
    """A model reference: a provider name and its options (``script`` for the built-in
    ``scripted`` provider; ``model`` and the like for registered providers)."""

    provider: str
    options: FrozenJson = attrs.field(factory=FrozenJson, converter=FrozenJson)


@attrs.frozen(kw_only=True)
class CursorBounds:
    """The memory bound of an agent's ``wait_for_event`` loop."""

    max_cursors: int = 16
    max_buffered: int = 10_000
    volatile: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    """Cursor topic patterns that opt out of durability (``Agent.volatile_cursors``)."""


@attrs.frozen(kw_only=True)
class AgentSpec:
    """One agent as data; its model is a reference, its tools are names."""

    id: str
    model: ModelRef
    role: str = ""
    instructions: str = ""
    tools: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    hub_tools: bool = True
    budget: BudgetSpec | None = None
    max_turns: int = 50
    cursors: CursorBounds = CursorBounds()


@attrs.frozen(kw_only=True)
class TaskSpec:
    description: str
    agent: str


@attrs.frozen(kw_only=True)
class SequentialSpec:
    mode: ClassVar[str] = "sequential"
    tasks: tuple[TaskSpec, ...] = attrs.field(converter=tuple)

    def agent_ids(self) -> tuple[str, ...]:
        return tuple(t.agent for t in self.tasks)


@attrs.frozen(kw_only=True)
class HierarchicalSpec:
    mode: ClassVar[str] = "hierarchical"
    manager: str
    workers: tuple[str, ...] = attrs.field(converter=tuple)
    goal: str

    def agent_ids(self) -> tuple[str, ...]:
        return (self.manager, *self.workers)


@attrs.frozen(kw_only=True)
class BranchSpec:
    id: str
    agent: str
    task: str = ""


@attrs.frozen(kw_only=True)
class ParallelSpec:
    mode: ClassVar[str] = "parallel"
    branches: tuple[BranchSpec, ...] = attrs.field(converter=tuple)
    join: Literal["all", "any", "quorum"] = "all"
    quorum: int | None = None
    aggregation: Literal["concat", "json", "majority"] = "concat"

    def agent_ids(self) -> tuple[str, ...]:
        return tuple(b.agent for b in self.branches)


@attrs.frozen(kw_only=True)
class ConsensualSpec:
    mode: ClassVar[str] = "consensual"
    voters: tuple[str, ...] = attrs.field(converter=tuple)
    proposal: str
    rule: Literal["majority", "supermajority", "unanimity"] = "majority"
    max_rounds: int = 3
    proposer: str | None = None

    def agent_ids(self) -> tuple[str, ...]:
        return (*self.voters, *(() if self.proposer is None else (self.proposer,)))


@attrs.frozen(kw_only=True)
class ConditionSpec:
    var: str
    op: Literal["==", "!=", "<", "<=", ">", ">="]
    value: JsonScalar


@attrs.frozen(kw_only=True)
class EdgeSpec:
    source: str
    target: str
    when: ConditionSpec | None = None


@attrs.frozen(kw_only=True)
class GraphSpec:
    mode: ClassVar[str] = "graph"
    nodes: FrozenJson = attrs.field(converter=FrozenJson)
    """Node name -> agent id."""
    edges: tuple[EdgeSpec, ...] = attrs.field(converter=tuple)
    start: str
    max_cycles: int = 10

    def agent_ids(self) -> tuple[str, ...]:
        return tuple(str(a) for a in self.nodes.values())


@attrs.frozen(kw_only=True)
class AutonomousSpec:
    mode: ClassVar[str] = "autonomous"
    root: str
    task: str
    max_depth: int = 2
    max_agents: int = 16
    sub_agent_budget: BudgetSpec | None = None
    roles: FrozenJson = attrs.field(factory=FrozenJson, converter=FrozenJson)
    """Role -> :class:`ModelRef` of the sub-agents created for it."""

    def agent_ids(self) -> tuple[str, ...]:
        return (self.root,)


OrchestrationSpec = SequentialSpec | HierarchicalSpec | ParallelSpec | ConsensualSpec | GraphSpec | AutonomousSpec


@attrs.frozen(kw_only=True)
class PublishDecl:
    """A topic the crew publishes; ``target_crew_id`` scopes it (absent: global)."""

    topic: str
    target_crew_id: str | None = None


@attrs.frozen(kw_only=True)
class SubscribeDecl:
    """Messages on ``topic`` (a pattern) are delivered to ``deliver_to``, a mailbox of
    the crew written with its name (``agent://{name}/{agent}``)."""

    topic: str
    deliver_to: str


def _optional_tuple(value: Iterable[PublishDecl] | None) -> tuple[PublishDecl, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(kw_only=True)
class EventSpec:
    """The ``event:`` block (spec §13.3, §13.5). ``publish`` ``None``: never declared
    (nothing is enforced); a tuple (even empty) is held to by ``undeclared_publish``."""

    publish: tuple[PublishDecl, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    subscribe: tuple[SubscribeDecl, ...] = attrs.field(default=(), converter=tuple)
    undeclared_publish: Literal["warn", "refuse"] = "warn"


@attrs.frozen(kw_only=True)
class A2aSkillSpec:
    """One skill on the crew's A2A agent card (``a2a.skills``; docs/a2a.md)."""

    id: str
    description: str
    name: str | None = None
    tags: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    examples: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen(kw_only=True)
class A2aSpec:
    """The ``a2a:`` block: the crew is served as an A2A agent (``orkeon a2a``,
    ``Runtime.start(a2a=PORT)``; docs/a2a.md). ``description`` and ``version`` go on
    its agent card (default: the crew's description, ``1.0.0``); ``agent`` receives
    the caller's messages (default: the crew's first agent); ``skills`` are the card's
    skills (default: one skill named after the crew); ``input_schema`` is the JSON
    Schema a caller's structured (data) part must satisfy (absent: any input)."""

    description: str | None = None
    version: str = "1.0.0"
    agent: str | None = None
    skills: tuple[A2aSkillSpec, ...] = attrs.field(default=(), converter=tuple)
    input_schema: FrozenJson | None = None
