"""orkeon_actors: an actor-model runtime for crews of LLM agents.

Everything a user imports lives here::

    import orkeon_actors as ok

    with ok.Runtime.start() as rt:
        client = rt.hub.bind("billing", "scorer")
        client.publish("orders.created", {"id": 42})

The facade: the hub's port and client, the model, crews (``ok.CrewActor``, ``ok.Agent``,
``ok.ScriptedModel``), the six orchestration modes (``ok.Sequential``, ``ok.Parallel``,
``ok.Hierarchical``, ``ok.Consensual``, ``ok.Graph``, ``ok.Autonomous``), the lifecycle
(``ok.CrewSupervisor``), simulations (``ok.Simulation``) and crews as data
(``ok.load_crew``, ``ok.CrewBuilder``); the same names live in ``ok.crew``,
``ok.orchestration``, ``ok.lifecycle``, ``ok.sim`` and ``ok.config``. Adapters (the
in-memory and SQLite hubs, the SQLite state store and indexes) are not part of the
facade: a runtime chooses them (``Runtime.start(store=...)``), or import them from their
modules. Names are imported on first use, so ``import orkeon_actors`` loads only the
model, the errors and the logging convention (which silences the library).

Errors are in :mod:`orkeon_actors.errors` (``ok.errors``), all subclasses of
``EventHubError``. The library is silent until ``ok.enable_logging()`` (see
:mod:`orkeon_actors.logs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orkeon_actors import errors
from orkeon_actors.lazy import lazy_attributes

# Eager on purpose: importing the logging convention silences the library
# (``logger.disable("orkeon_actors")``) before any of it can log.
from orkeon_actors.logs import StdlibPropagateHandler, disable_logging, enable_logging
from orkeon_actors.model import (
    FOREVER,
    NO_DECLARED_SCHEMA_ID,
    WAIT_TIMED_OUT_TOPIC,
    AgentId,
    Budget,
    CancelToken,
    Clock,
    CorrelationId,
    CrewId,
    FiniteWaitTimeout,
    ForeverWaitTimeout,
    MailboxAddress,
    Message,
    MessageId,
    PublishOptions,
    SystemClock,
    VirtualClock,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
)
from orkeon_actors.model.limits import Limits

if TYPE_CHECKING:
    from orkeon_actors import acl, aio, config, crew, lifecycle, middleware, orchestration, sim, store, tools
    from orkeon_actors.config import CrewBlueprint, CrewBuilder, load_crew, register_blueprint, scripted, start_crew
    from orkeon_actors.crew import Agent, CrewActor, ScriptedModel, call, respond
    from orkeon_actors.hub import (
        CallerContext,
        EventHub,
        HubClient,
        MailboxLease,
        MailboxReader,
        MailboxRegistration,
        Subscription,
    )
    from orkeon_actors.hub.pipeline import EventHubMiddleware
    from orkeon_actors.hub.schema_registry import EventSchemaRegistry, InMemoryEventSchemaRegistry
    from orkeon_actors.lifecycle import CrewSupervisor
    from orkeon_actors.middleware.genai import observe_agents
    from orkeon_actors.orchestration import (
        END,
        Autonomous,
        Branch,
        Consensual,
        Edge,
        Graph,
        Hierarchical,
        Parallel,
        Sequential,
        Task,
    )
    from orkeon_actors.runtime import Runtime
    from orkeon_actors.sim import Simulation, SimulationResult

_SUBPACKAGES: frozenset[str] = frozenset(
    {"acl", "aio", "config", "crew", "lifecycle", "middleware", "orchestration", "sim", "store", "tools"}
)
"""Subpackages reachable as attributes (``ok.crew``), imported on first use."""

_FACADE: dict[str, str] = {
    "CallerContext": "orkeon_actors.hub",
    "EventHub": "orkeon_actors.hub",
    "HubClient": "orkeon_actors.hub",
    "MailboxLease": "orkeon_actors.hub",
    "MailboxReader": "orkeon_actors.hub",
    "MailboxRegistration": "orkeon_actors.hub",
    "Subscription": "orkeon_actors.hub",
    "EventHubMiddleware": "orkeon_actors.hub.pipeline",
    "EventSchemaRegistry": "orkeon_actors.hub.schema_registry",
    "InMemoryEventSchemaRegistry": "orkeon_actors.hub.schema_registry",
    "Runtime": "orkeon_actors.runtime",
    "Agent": "orkeon_actors.crew",
    "CrewActor": "orkeon_actors.crew",
    "ScriptedModel": "orkeon_actors.crew",
    "call": "orkeon_actors.crew",
    "respond": "orkeon_actors.crew",
    "Autonomous": "orkeon_actors.orchestration",
    "Branch": "orkeon_actors.orchestration",
    "Consensual": "orkeon_actors.orchestration",
    "END": "orkeon_actors.orchestration",
    "Edge": "orkeon_actors.orchestration",
    "Graph": "orkeon_actors.orchestration",
    "Hierarchical": "orkeon_actors.orchestration",
    "Parallel": "orkeon_actors.orchestration",
    "Sequential": "orkeon_actors.orchestration",
    "Task": "orkeon_actors.orchestration",
    "CrewSupervisor": "orkeon_actors.lifecycle",
    "Simulation": "orkeon_actors.sim",
    "SimulationResult": "orkeon_actors.sim",
    "CrewBlueprint": "orkeon_actors.config",
    "CrewBuilder": "orkeon_actors.config",
    "load_crew": "orkeon_actors.config",
    "register_blueprint": "orkeon_actors.config",
    "scripted": "orkeon_actors.config",
    "start_crew": "orkeon_actors.config",
    "observe_agents": "orkeon_actors.middleware.genai",
}
"""Facade name -> the module defining it, imported on first use: ``import orkeon_actors``
loads only the model, the errors and the logging convention, and each subpackage only
what it builds on."""


__getattr__ = lazy_attributes(__name__, _FACADE, _SUBPACKAGES)


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "END",
    "FOREVER",
    "NO_DECLARED_SCHEMA_ID",
    "WAIT_TIMED_OUT_TOPIC",
    "Agent",
    "AgentId",
    "Autonomous",
    "Branch",
    "Budget",
    "CallerContext",
    "CancelToken",
    "Clock",
    "Consensual",
    "CorrelationId",
    "CrewActor",
    "CrewBlueprint",
    "CrewBuilder",
    "CrewId",
    "CrewSupervisor",
    "Edge",
    "EventHub",
    "EventHubMiddleware",
    "EventSchemaRegistry",
    "FiniteWaitTimeout",
    "ForeverWaitTimeout",
    "Graph",
    "Hierarchical",
    "HubClient",
    "InMemoryEventSchemaRegistry",
    "Limits",
    "MailboxAddress",
    "MailboxLease",
    "MailboxReader",
    "MailboxRegistration",
    "Message",
    "MessageId",
    "Parallel",
    "PublishOptions",
    "Runtime",
    "ScriptedModel",
    "Sequential",
    "Simulation",
    "SimulationResult",
    "StdlibPropagateHandler",
    "Subscription",
    "SystemClock",
    "Task",
    "VirtualClock",
    "WaitDescriptor",
    "WaitOnMailbox",
    "WaitOnReply",
    "WaitOnTopic",
    "WaitTimeout",
    "acl",
    "aio",
    "call",
    "config",
    "crew",
    "disable_logging",
    "enable_logging",
    "errors",
    "lifecycle",
    "load_crew",
    "middleware",
    "observe_agents",
    "orchestration",
    "register_blueprint",
    "respond",
    "scripted",
    "sim",
    "start_crew",
    "store",
    "tools",
]
