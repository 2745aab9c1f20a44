"""Crews as data: the canonical crew schema, YAML loading, the fluent builder and the
immutable ``CrewBlueprint`` they all produce (Orkeon EventHub & Crew Lifecycle
specification, §13).

::

    import orkeon_actors as ok

    bp = ok.load_crew("examples/crews/sequential.yaml")       # or ok.CrewBuilder()...build()
    with ok.Runtime.start(middleware=[ok.config.EventDeclarations()]) as rt:
        ref = ok.start_crew(bp, rt)

See ``docs/crew-config.md`` (how to write and run crews) and ``docs/crew-schema.md``
(the schema, generated from it).
"""

from orkeon_actors.config.bindings import DurableBindings
from orkeon_actors.config.blueprint import CrewBlueprint, document_issues
from orkeon_actors.config.builder import CrewBuilder, scripted
from orkeon_actors.config.declarations import EventDeclarations, declarations_of
from orkeon_actors.config.durations import format_duration, parse_duration
from orkeon_actors.config.issues import ConfigIssue, Position
from orkeon_actors.config.launch import BlueprintFactory, register_blueprint, register_declarations, start_crew
from orkeon_actors.config.loader import crew_document, load_crew
from orkeon_actors.config.materialize import build_agents, build_orchestration, crew_actor_options
from orkeon_actors.config.model_registry import (
    ENTRY_POINT_GROUP,
    ModelContext,
    ModelProvider,
    create_model,
    model_provider,
    model_provider_names,
    register_model_provider,
    unregister_model_provider,
)
from orkeon_actors.config.schema import SCHEMA_ID, crew_schema, schema_text
from orkeon_actors.config.spec import (
    AgentSpec,
    AutonomousSpec,
    BranchSpec,
    BudgetSpec,
    ConditionSpec,
    ConsensualSpec,
    CursorBounds,
    EdgeSpec,
    EventSpec,
    GraphSpec,
    HierarchicalSpec,
    ModelRef,
    ParallelSpec,
    PublishDecl,
    SequentialSpec,
    SubscribeDecl,
    TaskSpec,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "SCHEMA_ID",
    "AgentSpec",
    "AutonomousSpec",
    "BlueprintFactory",
    "BranchSpec",
    "BudgetSpec",
    "ConditionSpec",
    "ConfigIssue",
    "ConsensualSpec",
    "CrewBlueprint",
    "CrewBuilder",
    "CursorBounds",
    "EdgeSpec",
    "EventDeclarations",
    "EventSpec",
    "GraphSpec",
    "HierarchicalSpec",
    "ModelContext",
    "ModelProvider",
    "ModelRef",
    "ParallelSpec",
    "Position",
    "PublishDecl",
    "SequentialSpec",
    "DurableBindings",
    "SubscribeDecl",
    "TaskSpec",
    "build_agents",
    "build_orchestration",
    "create_model",
    "crew_actor_options",
    "crew_document",
    "crew_schema",
    "declarations_of",
    "document_issues",
    "format_duration",
    "load_crew",
    "model_provider",
    "model_provider_names",
    "parse_duration",
    "register_blueprint",
    "register_declarations",
    "register_model_provider",
    "schema_text",
    "scripted",
    "start_crew",
    "unregister_model_provider",
]
