"""From a :class:`CrewBlueprint` (data) to what a crew actor runs: :class:`Agent`\\ s with
their models and tools, the :class:`Orchestration`, the ``on_event`` bindings, and the
keyword arguments of ``CrewActor.start``.

Models come from the provider registry (:mod:`orkeon_actors.config.model_registry`),
tools from the ``tools`` mapping the caller passes (tools are code: a document names
them). A name that resolves to nothing raises
:class:`~orkeon_actors.errors.CrewConfigError` with the path of the reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.config.issues import ConfigIssue, raise_if_any
from orkeon_actors.config.model_registry import ModelContext, create_model
from orkeon_actors.config.spec import (
    AgentSpec,
    AutonomousSpec,
    BudgetSpec,
    ConsensualSpec,
    GraphSpec,
    HierarchicalSpec,
    ParallelSpec,
    SequentialSpec,
)
from orkeon_actors.crew.agent import Agent, BudgetLimits, Tool
from orkeon_actors.crew.crew_actor import EventBinding
from orkeon_actors.crew.model import Model
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId
from orkeon_actors.orchestration import (
    Autonomous,
    Branch,
    Condition,
    Consensual,
    Edge,
    Graph,
    Hierarchical,
    Orchestration,
    OrchestrationError,
    Parallel,
    Sequential,
    Task,
)

__all__ = [
    "budget_limits",
    "build_agents",
    "build_bindings",
    "build_orchestration",
    "crew_actor_options",
    "deliver_address",
]


def budget_limits(spec: BudgetSpec | None, crew_default: BudgetSpec | None = None) -> BudgetLimits:
    """The runtime limits of ``spec``, unset fields taken from ``crew_default``."""
    merged = (spec or BudgetSpec()).under(crew_default)
    return BudgetLimits(
        max_tokens=merged.max_tokens,
        max_tool_calls=merged.max_tool_calls,
        max_wall_time=None if merged.max_wall_time is None else float(merged.max_wall_time),
        max_cost=merged.max_cost,
    )


def _agent(bp: CrewBlueprint, index: int, spec: AgentSpec, crew_id: CrewId, tools: Mapping[str, Tool]) -> Agent:
    missing = [name for name in spec.tools if name not in tools]
    if missing:
        issues = [
            ConfigIssue(
                ("agents", index, "tools", spec.tools.index(name)),
                f"names the tool {name!r}, which was not given; pass tools={{{name!r}: Tool(...)}} "
                f"(given: {', '.join(sorted(tools)) or 'none'})",
            )
            for name in missing
        ]
        raise_if_any(issues, f"crew {bp.name!r}")
    context = ModelContext(bp.name, str(crew_id), spec.id, spec.role)
    agent_tools: tuple[Tool, ...] = tuple(tools[name] for name in spec.tools)
    return Agent(
        spec.id,
        create_model(spec.model.provider, spec.model.options, context),
        role=spec.role,
        instructions=spec.instructions,
        tools=agent_tools,  # type: ignore[arg-type]  # mypy reads the converter=tuple of Agent.tools as generic
        budget=budget_limits(spec.budget, bp.budget),
        hub_tools=spec.hub_tools,
        max_turns=spec.max_turns,
        max_cursors=spec.cursors.max_cursors,
        max_buffered=spec.cursors.max_buffered,
        volatile_cursors=frozenset(spec.cursors.volatile),
    )


def build_agents(bp: CrewBlueprint, crew_id: CrewId, tools: Mapping[str, Tool] | None = None) -> list[Agent]:
    """The crew's agents, models built for ``crew_id``."""
    return [_agent(bp, i, spec, crew_id, tools or {}) for i, spec in enumerate(bp.agents)]


def build_orchestration(bp: CrewBlueprint, crew_id: CrewId) -> Orchestration:
    """The orchestration mode the blueprint configures."""
    o = bp.orchestration
    if isinstance(o, SequentialSpec):
        return Sequential([Task(t.description, t.agent) for t in o.tasks])
    if isinstance(o, HierarchicalSpec):
        return Hierarchical(o.manager, list(o.workers), o.goal)
    if isinstance(o, ParallelSpec):
        branches = [Branch(b.id, b.agent, b.task) for b in o.branches]
        return Parallel(branches, join=o.join, quorum=o.quorum, aggregation=o.aggregation)
    if isinstance(o, ConsensualSpec):
        return Consensual(list(o.voters), o.proposal, rule=o.rule, max_rounds=o.max_rounds, proposer=o.proposer)
    if isinstance(o, GraphSpec):
        edges = [
            Edge(e.source, e.target, None if e.when is None else Condition(e.when.var, e.when.op, e.when.value))
            for e in o.edges
        ]
        return Graph({k: str(v) for k, v in o.nodes.items()}, edges, start=o.start, max_cycles=o.max_cycles)
    return _autonomous(bp, o, crew_id)


def _autonomous(bp: CrewBlueprint, o: AutonomousSpec, crew_id: CrewId) -> Autonomous:
    roles = dict(o.roles)

    def model_factory(role: str, depth: int) -> Model:
        ref = roles.get(role)
        if ref is None:
            raise OrchestrationError(
                f"crew {bp.name!r}: no model for sub-agent role {role!r}; declare it under orchestration.roles "
                f"(declared: {', '.join(roles) or 'none'})"
            )
        context = ModelContext(bp.name, str(crew_id), f"{role}@{depth}", role, depth)
        return create_model(ref.provider, ref.options, context)

    return Autonomous(
        o.root,
        o.task,
        model_factory=model_factory,
        max_depth=o.max_depth,
        max_agents=o.max_agents,
        sub_agent_budget=budget_limits(o.sub_agent_budget, bp.budget),
    )


def deliver_address(deliver_to: str, crew_id: CrewId) -> MailboxAddress:
    """``agent://{name}/{agent}`` or ``crew://{name}`` (written with the crew's name)
    as the mailbox of crew ``crew_id``."""
    scheme, _, rest = deliver_to.partition("://")
    if scheme == "crew":
        return MailboxAddress.crew(crew_id)
    return MailboxAddress.agent(crew_id, rest.partition("/")[2])


def build_bindings(bp: CrewBlueprint, crew_id: CrewId) -> list[EventBinding]:
    """The ``event.subscribe`` declarations as ``on_event`` bindings of ``crew_id``."""
    return [EventBinding(s.topic, deliver_address(s.deliver_to, crew_id)) for s in bp.event.subscribe]


def crew_actor_options(bp: CrewBlueprint, crew_id: CrewId, tools: Mapping[str, Tool] | None = None) -> dict[str, Any]:
    """The keyword arguments of ``CrewActor.start(hub, **options)`` for crew
    ``crew_id`` of this blueprint (add ``acl=``, ``observer=`` and the like)."""
    return {
        "agents": build_agents(bp, crew_id, tools),
        "orchestration": build_orchestration(bp, crew_id),
        "name": bp.name,
        "crew_id": crew_id,
        "idle_timeout": None if bp.idle_timeout is None else float(bp.idle_timeout),
        "links": bp.links.links if bp.links.declared else None,
        "bindings": build_bindings(bp, crew_id),
    }
