"""Running a :class:`CrewBlueprint`: on a hub (:func:`start_crew`), under the lifecycle
supervisor (:func:`register_blueprint`), or in a simulation
(``Simulation.spawn(blueprint)``, which calls :func:`crew_actor_options`).

Wherever it runs, a blueprint's crew is the same ``CrewActor`` with the same agents,
orchestration, idle timeout, links and bindings; its ``event.publish`` declarations are
registered with the runtime's :class:`~orkeon_actors.config.EventDeclarations` stage
when the runtime has one (a blueprint that declares them on a runtime without the stage
logs a warning saying they are not enforced).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import pykka
from loguru import logger

from orkeon_actors.acl.registry import AclRegistry
from orkeon_actors.config.bindings import DurableBindings
from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.config.declarations import declarations_of
from orkeon_actors.config.materialize import crew_actor_options
from orkeon_actors.crew.agent import Tool
from orkeon_actors.crew.crew_actor import CrewActor, CrewObserver
from orkeon_actors.crew.crew_actor import start_crew as begin_crew
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.port import EventHub
from orkeon_actors.lifecycle.activation import CrewBlueprint as BuiltBlueprint
from orkeon_actors.lifecycle.supervisor import CrewSupervisor
from orkeon_actors.model.ids import CrewId
from orkeon_actors.runtime import Runtime
from orkeon_actors.store.durable_hub import SqliteEventHub

__all__ = ["BlueprintFactory", "register_blueprint", "register_declarations", "start_crew"]


def register_declarations(hub: EventHub, blueprint: CrewBlueprint, crew_id: CrewId) -> None:
    """Hold crew ``crew_id`` to the blueprint's ``event.publish`` on ``hub`` (see
    :mod:`orkeon_actors.config.declarations`)."""
    if blueprint.event.publish is None:
        return
    stage = declarations_of(hub)
    if stage is None:
        logger.warning(
            "crew {!r} declares event.publish but its runtime has no EventDeclarations stage: not enforced; "
            "start the runtime with middleware=[orkeon_actors.config.EventDeclarations()]",
            blueprint.name,
        )
        return
    stage.register(crew_id, blueprint.name, blueprint.event)


def start_crew(
    blueprint: CrewBlueprint | pykka.ActorRef[CrewActor],
    runtime: Runtime | EventHub | None = None,
    *,
    crew_id: CrewId | str | None = None,
    tools: Mapping[str, Tool] | None = None,
    cls: type[CrewActor] = CrewActor,
    **options: Any,
) -> pykka.ActorRef[CrewActor]:
    """Start and begin the crew of ``blueprint`` on ``runtime`` (a :class:`Runtime` or
    its hub); returns its actor ref. ``crew_id`` defaults to a new ULID id; ``tools``
    resolves the tool names the agents declare; further ``options`` (``acl=``,
    ``observer=``, ...) go to ``CrewActor.start``.

    Given an actor ref instead of a blueprint, begins that started crew (what
    :func:`orkeon_actors.crew.start_crew` does) and returns it."""
    if isinstance(blueprint, pykka.ActorRef):
        begin_crew(blueprint, options.get("activity"), options.get("gate"))
        return blueprint
    if runtime is None:
        raise TypeError("start_crew(blueprint, runtime): give the Runtime (or hub) the crew runs on")
    hub = runtime.hub if isinstance(runtime, Runtime) else runtime
    crew = CrewId(crew_id) if crew_id is not None else CrewId.new()
    register_declarations(hub, blueprint, crew)
    ref = cls.start(hub, **crew_actor_options(blueprint, crew, tools), **options)
    begin_crew(ref)
    return ref


@attrs.frozen(eq=False)
class BlueprintFactory:
    """The ``CrewFactory`` of a blueprint (``factory(crew_id) -> lifecycle blueprint``):
    called by the supervisor at every spawn and wake. It rebuilds the models from their
    references (a scripted model resumes at the step its conversation reached), records
    the crew's bindings with :class:`DurableBindings` (which delivers them, so the crew
    actor subscribes to none itself), its publish declarations, and its links with
    ``acl`` when one is given."""

    blueprint: CrewBlueprint
    hub: SqliteEventHub
    tools: Mapping[str, Tool] = attrs.field(factory=dict)
    cls: type[CrewActor] = CrewActor
    observer: CrewObserver | None = None
    acl: AclRegistry | None = None

    def __call__(self, crew_id: CrewId) -> BuiltBlueprint:
        options = crew_actor_options(self.blueprint, crew_id, self.tools)
        bindings = options["bindings"]
        if bindings:
            DurableBindings.for_hub(self.hub).record(crew_id, bindings)
        register_declarations(self.hub, self.blueprint, crew_id)
        if self.acl is not None:
            self.acl.register_crew(self.blueprint.name, crew_id, self.blueprint.links)
        return BuiltBlueprint(
            agents=options["agents"],
            orchestration=options["orchestration"],
            cls=self.cls,
            idle_timeout=options["idle_timeout"],
            observer=self.observer,
        )


def register_blueprint(
    supervisor: CrewSupervisor,
    blueprint: CrewBlueprint,
    *,
    tools: Mapping[str, Tool] | None = None,
    cls: type[CrewActor] = CrewActor,
    observer: CrewObserver | None = None,
    acl: AclRegistry | None = None,
) -> BlueprintFactory:
    """Register ``blueprint`` with ``supervisor`` under its name (then
    ``supervisor.spawn(blueprint.name)``); its subscriptions keep delivering while its
    crews sleep (:class:`DurableBindings`); with ``acl`` each crew registers its name and
    ``links:`` there at every spawn and wake. Returns the factory registered."""
    hub = supervisor.hub
    if not isinstance(hub, SqliteEventHub):
        raise InvalidArgumentError(
            f"register_blueprint needs a supervisor on the SQLite store, got one on {type(hub).__name__}"
        )
    factory = BlueprintFactory(blueprint, hub, dict(tools or {}), cls, observer, acl)
    if blueprint.event.subscribe:
        DurableBindings.for_hub(hub)
    supervisor.register_factory(blueprint.name, factory)
    return factory
