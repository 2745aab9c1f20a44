"""The bootstrap: one place that wires clock, scheduler, middleware and hub together.

``Runtime.start()`` boots the actors; ``stop()`` (or leaving the ``with`` block) stops
every actor and thread it started, and blocked callers get ``HubStoppedError``. A runtime
still running when the interpreter exits is stopped then (``atexit``; its threads are
daemon threads, so they never hold the exit up): a program that forgets ``stop()``, or is
ended by Ctrl-C, exits and a durable store keeps everything it committed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import attrs

from orkeon_actors.actors import DEFAULT_POOL
from orkeon_actors.actors.exit import forget_at_exit, stop_at_exit
from orkeon_actors.crew import agent_io
from orkeon_actors.hub.memory import HubCore, InMemoryEventHub
from orkeon_actors.hub.pipeline import EventHubMiddleware, MiddlewareContext, Pipeline
from orkeon_actors.hub.port import EventHub
from orkeon_actors.hub.scheduler import Scheduler
from orkeon_actors.hub.schema_registry import EventSchemaRegistry, InMemoryEventSchemaRegistry
from orkeon_actors.middleware.discovery import resolve_stages
from orkeon_actors.model.agent_events import AgentEventJournal
from orkeon_actors.model.clock import Clock, SystemClock
from orkeon_actors.model.limits import DEFAULT_LIMITS, Limits

if TYPE_CHECKING:
    from orkeon_actors.a2a.client import A2AAgents
    from orkeon_actors.a2a.server import A2AConfig, A2AServer
    from orkeon_actors.fleet.config import FleetConfig
    from orkeon_actors.fleet.operations import Fleet
    from orkeon_actors.lifecycle.ports import LifecycleBackend
    from orkeon_actors.lifecycle.supervisor import CrewSupervisor
    from orkeon_actors.store.agent_events import AgentEventRecorder
    from orkeon_actors.store.config import Durability, StoreConfig
    from orkeon_actors.studio import LifecycleWatcher, StudioServer, StudioTap

__all__ = ["Runtime"]


class Runtime:
    """A running hub and its supporting actors.

    ``hub`` is the :class:`~orkeon_actors.hub.port.EventHub`; ``clock`` the time source
    (pass a :class:`~orkeon_actors.model.clock.VirtualClock` to drive time yourself);
    ``schema_registry`` the :class:`EventSchemaRegistry` validation stages consult.
    """

    _pipeline: Pipeline | None = None
    _studio_watcher: LifecycleWatcher | None = None
    _studio_tap: StudioTap | None = None
    _agent_event_recorder: AgentEventRecorder | None = None
    a2a_agents: A2AAgents | None = None
    """The external A2A agents its crews may call, when started with ``a2a_agents=``
    (``docs/a2a-calling.md``): ``rt.a2a_agents.tool()`` is the ``ask_agent`` tool."""
    a2a: A2AServer | None = None
    """The A2A server of a runtime started with ``a2a=PORT`` (``docs/a2a.md``): expose
    crews with ``rt.a2a.expose(blueprint)``; ``None`` otherwise."""
    fleet: Fleet | None = None
    """A fleet host's cross-host operations (spawn, stop, dead-letter reports), when
    started with a broker (``docs/distributed.md``); ``None`` otherwise."""

    def __init__(self, hub: EventHub, scheduler: Scheduler, clock: Clock) -> None:
        self.hub = hub
        self.scheduler = scheduler
        self.clock = clock
        self.schema_registry: EventSchemaRegistry = InMemoryEventSchemaRegistry()
        self.supervisors: list[CrewSupervisor] = []
        """The crew supervisors started on this runtime and not yet stopped (they add
        themselves): what observers such as the Studio enumerate."""
        self.studio: StudioServer | None = None
        """The Studio serving this runtime, when started with ``studio=PORT``."""
        self.agent_events = AgentEventJournal()
        """What this runtime's agents did: each model call and tool call, started and
        finished (:mod:`orkeon_actors.model.agent_events`); a bounded history, so an
        observer that attaches late sees what came before it."""
        self.agent_io = agent_io.AgentIO(self.agent_events)
        """The runtime's asyncio I/O loop (one thread, started at the first async model
        or tool call; ``docs/crews.md``) and the bound of its executor for blocking
        models (``agent_io.loop.max_blocking_threads``)."""
        agent_io.attach(hub, self.agent_io)
        self._stopped = False
        stop_at_exit(self)

    @classmethod
    def start(
        cls,
        *,
        middleware: Sequence[EventHubMiddleware | str] = (),
        clock: Clock | None = None,
        schema_registry: EventSchemaRegistry | None = None,
        store: str | os.PathLike[str] | StoreConfig | None = None,
        durability: Durability | str | None = None,
        max_payload_bytes: int | None = None,
        limits: Limits | None = None,
        studio: int | None = None,
        studio_post: bool = False,
        broker: str | None = None,
        host_id: str | None = None,
        fleet: FleetConfig | None = None,
        a2a_agents: Mapping[str, Any] | None = None,
        a2a: int | A2AConfig | None = None,
    ) -> Runtime:
        """Boot an in-memory runtime.

        ``middleware`` stages run in registration order on the publish path and in
        reverse on the receive path (spec §12); a string names an installed plugin
        (entry point group ``orkeon_actors.middleware``), instantiated without arguments
        at that position. Stages defining ``attach(context)`` are attached before
        ``start`` returns (``docs/middleware.md``). ``schema_registry`` defaults to a new
        :class:`InMemoryEventSchemaRegistry`.

        ``store`` makes the hub durable: a database file path (or a
        :class:`~orkeon_actors.store.StoreConfig`) for a
        :class:`~orkeon_actors.store.SqliteEventHub`; ``None`` (the default) keeps it in
        memory. ``durability`` is ``"full"`` (default) or ``"normal"`` (``docs/store.md``).
        Opening a store raises ``StoreLockedError`` / ``StoreVersionError`` /
        ``StoreError`` and then leaves nothing running.

        ``limits`` bounds what callers may send and hold (``docs/security.md``);
        ``max_payload_bytes`` (default 16 MiB) overrides its payload bound: a larger
        payload is refused with ``LimitExceededError`` before anything is stored or
        routed.

        ``studio`` serves the Studio web view on that port of 127.0.0.1 (``0``: any free
        port; the address, token included, is :attr:`studio`'s ``url``). Its stage joins
        the front of the chain only while a browser watches: otherwise a message costs
        nothing more. ``studio_post=True`` lets the page post as ``client://studio``
        (``docs/studio.md``).

        ``broker`` (an AMQP URI) with ``host_id`` makes this runtime one host of a fleet
        on RabbitMQ (``docs/distributed.md``): it needs ``store`` (each host keeps its own
        crews there) and the fleet's signing keys (``fleet=FleetConfig(...)``, else the
        file named by ``$ORKEON_FLEET_KEYS``). ``fleet`` alone carries all of it.
        Raises ``BrokerUnavailableError`` when the broker does not answer in time.

        ``a2a_agents`` names the external A2A agents its crews may call: ``{NAME: CARD_URL}``
        (the base URL of the agent's ``/.well-known/agent-card.json``) or ``{NAME:
        RemoteAgent(...)}`` for a timeout, headers (a bearer token) and more. Agents reach
        one with the ``ask_agent`` tool (:attr:`a2a_agents`) or by posting to
        ``a2a://NAME``; a crew needs a link naming ``a2a:NAME`` (``docs/a2a-calling.md``).
        Needs the ``a2a`` extra (``ExtraNotInstalledError`` otherwise).

        ``a2a`` (a port, ``0`` for a free one, or an ``A2AConfig`` with callers and bind
        address) serves crews as A2A agents (``docs/a2a.md``; the ``a2a`` extra): it needs
        ``store``, adds an ACL stage (``AclMiddleware``) when ``middleware`` has none, and
        :attr:`a2a` then exposes crews (``rt.a2a.expose(blueprint)``).
        """
        if a2a is not None:
            middleware = _with_acl(middleware, store)
        fleet = _fleet_config(broker, host_id, fleet, store)
        bounds = limits if limits is not None else DEFAULT_LIMITS
        if max_payload_bytes is not None:
            bounds = attrs.evolve(bounds, max_payload_bytes=max_payload_bytes)
        clock = clock or SystemClock()
        pipeline = Pipeline(resolve_stages(middleware))
        registry = schema_registry if schema_registry is not None else InMemoryEventSchemaRegistry()
        scheduler = Scheduler(clock)
        hub = _make_hub(clock, scheduler, pipeline, store, durability, fleet)
        hub.limits = bounds
        try:
            pipeline.attach(MiddlewareContext(hub, clock, registry))
        except BaseException:
            hub.stop()
            scheduler.stop()
            raise
        runtime = cls(hub, scheduler, clock)
        runtime.agent_io.keyed_tool_calls = store is not None and _keeps_sent_history(hub)
        runtime.schema_registry = registry
        runtime._pipeline = pipeline
        if store is not None:
            runtime._record_agent_events()
        if a2a_agents:
            try:
                runtime._start_a2a_agents(a2a_agents)
            except BaseException:
                runtime.stop()
                raise
        if fleet is not None:
            runtime._start_fleet()
        if studio is not None:
            try:
                runtime._start_studio(port=studio, allow_post=studio_post)
            except BaseException:
                runtime.stop()
                raise
        if a2a is not None:
            try:
                runtime._start_a2a(a2a)
            except BaseException:
                runtime.stop()
                raise
        return runtime

    def _start_a2a(self, config: int | A2AConfig) -> None:
        try:
            from orkeon_actors.a2a.server import A2AConfig, A2AServer
        except ModuleNotFoundError as exc:
            from orkeon_actors.a2a import EXTRA_MODULES
            from orkeon_actors.errors import ExtraNotInstalledError

            if exc.name is None or exc.name.split(".")[0] not in EXTRA_MODULES:
                raise
            raise ExtraNotInstalledError(
                f'Runtime.start(a2a=...) needs the "a2a" extra ({exc.name} is missing): '
                'pip install "orkeon-actors[a2a]"',
                extra="a2a",
            ) from None
        self.a2a = A2AServer(self, A2AConfig(port=config) if isinstance(config, int) else config)

    def _start_fleet(self) -> None:
        from orkeon_actors.fleet.hub import AmqpEventHub
        from orkeon_actors.fleet.operations import Fleet

        assert isinstance(self.hub, AmqpEventHub)
        try:
            self.fleet = Fleet(self.hub).start()
        except BaseException:
            self.stop()
            raise

    def _start_a2a_agents(self, config: Mapping[str, Any]) -> None:
        from orkeon_actors.errors import ExtraNotInstalledError

        try:
            from orkeon_actors.a2a.client import A2AAgents
        except ImportError as exc:
            raise ExtraNotInstalledError(
                f"calling A2A agents needs a2a-sdk ({exc}): pip install 'orkeon-actors[a2a]'", extra="a2a"
            ) from None
        from orkeon_actors.acl.stage import AclMiddleware

        stage = next((s for s in self.middleware if isinstance(s, AclMiddleware)), None)
        self.a2a_agents = A2AAgents(
            config,
            hub=self.hub,
            loop=self.agent_io.loop,
            clock=self.clock,
            policy=None if stage is None else stage.policy,
        )

    def lifecycle_backend(self) -> LifecycleBackend:
        """What :class:`~orkeon_actors.lifecycle.CrewSupervisor` runs on: the durable hub
        with its crew state store and wake indexes (the SQLite adapter's). Raises
        ``InvalidArgumentError`` for an in-memory runtime: crews sleep only where their
        state outlives the process."""
        from orkeon_actors.errors import InvalidArgumentError
        from orkeon_actors.store import SqliteEventHub
        from orkeon_actors.store.wake_index import SqliteLifecycleBackend

        if not isinstance(self.hub, SqliteEventHub):
            raise InvalidArgumentError("crew sleep and wake need a durable runtime: Runtime.start(store='state.db')")
        return SqliteLifecycleBackend(self.hub)

    @property
    def middleware(self) -> tuple[EventHubMiddleware, ...]:
        """The stages of the chain, in registration order."""
        return () if self._pipeline is None else self._pipeline.stages

    def _record_agent_events(self) -> None:
        """On a durable runtime, keep the agents' events in the store too, for
        ``orkeon studio --store`` (:mod:`orkeon_actors.store.agent_events`)."""
        from orkeon_actors.store import SqliteEventHub
        from orkeon_actors.store.agent_events import AgentEventRecorder

        if isinstance(self.hub, SqliteEventHub):
            self._agent_event_recorder = AgentEventRecorder(self.hub.writer).attach(self.agent_events)

    def _start_studio(self, *, port: int, allow_post: bool) -> None:
        from orkeon_actors.studio import LifecycleWatcher, LiveSource, StudioFeed, StudioServer, StudioTap

        tap = StudioTap(StudioFeed())
        tap.install(self.hub, self.clock)
        self._studio_tap = tap
        source = LiveSource(self, tap, allow_post=allow_post)
        self._studio_watcher = LifecycleWatcher(tap.feed, source.crew_states, self.clock)
        self.studio = StudioServer(source, tap.feed, port=port)

    def stop(self) -> None:
        """Stop the hub and the scheduler, then end the idle threads of the actor pool
        (:data:`~orkeon_actors.actors.DEFAULT_POOL`, where mailboxes and crews run);
        idempotent."""
        if self._stopped:
            return
        self._stopped = True
        forget_at_exit(self)
        if self.a2a is not None:
            self.a2a.stop()
        if self.studio is not None:
            self.studio.stop()
        if self._studio_watcher is not None:
            self._studio_watcher.stop()
        if self._studio_tap is not None:
            self._studio_tap.uninstall()
        if self.fleet is not None:
            self.fleet.close()
        if self.a2a_agents is not None:
            self.a2a_agents.close()
        self.agent_io.stop()  # calls in flight are cancelled before the hub goes
        agent_io.detach(self.hub)
        if self._agent_event_recorder is not None:
            self._agent_event_recorder.detach()
        self.hub.stop()
        self.scheduler.stop()
        if self._pipeline is not None:
            self._pipeline.detach()
        DEFAULT_POOL.trim()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _make_hub(
    clock: Clock,
    scheduler: Scheduler,
    pipeline: Pipeline,
    store: str | os.PathLike[str] | StoreConfig | None,
    durability: Durability | str | None,
    fleet: FleetConfig | None = None,
) -> HubCore:
    """The in-memory hub when ``store`` is ``None``, else the durable hub on that file
    (a fleet host's when ``fleet`` is given). Stops ``scheduler`` if it cannot be opened."""
    if store is None:
        if durability is not None:
            from orkeon_actors.errors import InvalidArgumentError

            scheduler.stop()
            raise InvalidArgumentError("durability only applies to a durable hub: pass store='state.db' too")
        return InMemoryEventHub(clock, scheduler, pipeline)
    from orkeon_actors.store import SqliteEventHub, StoreConfig

    try:
        if isinstance(store, StoreConfig):
            config = store if durability is None else attrs.evolve(store, durability=durability)
        else:
            config = StoreConfig(store) if durability is None else StoreConfig(store, durability=durability)
        if fleet is not None:
            from orkeon_actors.fleet.hub import AmqpEventHub

            return AmqpEventHub(config, fleet, clock, scheduler, pipeline)
        return SqliteEventHub(config, clock, scheduler, pipeline)
    except BaseException:
        scheduler.stop()
        raise


def _with_acl(middleware: Sequence[EventHubMiddleware | str], store: object) -> Sequence[EventHubMiddleware | str]:
    """``middleware`` with an ACL stage at its end if it has none (an A2A server admits
    its callers through the crews' ``links:``, held in that stage's registry)."""
    from orkeon_actors.acl import AclMiddleware, AclRegistry
    from orkeon_actors.errors import InvalidArgumentError

    if store is None:
        raise InvalidArgumentError(
            "an A2A server keeps its tasks and crews in the store: pass store='state.db' with a2a=PORT"
        )
    if any(isinstance(stage, AclMiddleware) for stage in middleware):
        return middleware
    return [*middleware, AclMiddleware(AclRegistry())]


def _keeps_sent_history(hub: HubCore) -> bool:
    """Whether ``hub`` (a durable one) keeps the sent history, so an agent's keyed
    tool call is a keyed retry after a crash (``docs/crews.md``)."""
    from orkeon_actors.store import SqliteEventHub

    return isinstance(hub, SqliteEventHub) and hub.config.sent_history


def _fleet_config(
    broker: str | None,
    host_id: str | None,
    fleet: FleetConfig | None,
    store: object,
) -> FleetConfig | None:
    """The fleet membership ``Runtime.start`` was asked for, or ``None``."""
    from orkeon_actors.errors import InvalidArgumentError

    if fleet is None and broker is None and host_id is None:
        return None
    if store is None:
        raise InvalidArgumentError(
            "a fleet host needs its own durable store for its crews: pass store='host-a.db' with broker=..."
        )
    if fleet is not None:
        if broker is not None or host_id is not None:
            raise InvalidArgumentError("pass either fleet=FleetConfig(...) or broker= and host_id=, not both")
        return fleet
    if broker is None or host_id is None:
        raise InvalidArgumentError(
            "a fleet host needs both broker='amqp://user:pass@host:5672/vhost' and host_id='host-a' "
            "(unique in the fleet)"
        )
    from orkeon_actors.fleet.config import FleetConfig, load_keys

    return FleetConfig(broker, host_id, load_keys())
