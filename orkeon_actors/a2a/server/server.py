"""``A2AServer``: the crews of a durable runtime served as A2A agents (docs/a2a.md).

One HTTP server (uvicorn, on its own thread and event loop) serves every exposed crew
with the official SDK (``a2a-sdk``): crew ``NAME`` has its agent card at
``/NAME/.well-known/agent-card.json`` and its JSON-RPC endpoint at ``/NAME/`` (v1.0
methods, and the v0.3 ones through the SDK's compatibility mode); while exactly one
crew is exposed its card is also at ``/.well-known/agent-card.json``.

Who may call is decided before the SDK sees a request, by the package's one HTTP guard
(:class:`~orkeon_actors.http_guard.HttpGuard`): a bearer token naming the caller,
``Host`` and ``Origin`` checked, 127.0.0.1 unless ``allow_remote``. The card of every
crew declares the bearer scheme. The caller's name is its ``client://`` identity:
tasks are its own (another caller's task is not found), and the crew's ``links:``
admit it or not (:mod:`orkeon_actors.a2a.server.crew_tasks`).

Tasks are kept in the runtime's store (:mod:`orkeon_actors.a2a.server.task_store`), so
``tasks/get`` answers after a restart, and crews asleep on their caller wake on its
answer. Push notification configurations are kept in memory (lost on a restart).
"""

from __future__ import annotations

import secrets
import socket
import threading
from collections.abc import Mapping
from typing import Any

import attrs
import httpx
import uvicorn
from a2a.auth.user import User
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import DefaultServerCallContextBuilder, create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import BasePushNotificationSender, InMemoryPushNotificationConfigStore
from loguru import logger
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import BaseRoute, Mount

from orkeon_actors.a2a.server.card import agent_card
from orkeon_actors.a2a.server.crew_tasks import CrewTasks
from orkeon_actors.a2a.server.executor import CrewExecutor
from orkeon_actors.a2a.server.task_store import SqliteTaskStore, ensure_table
from orkeon_actors.acl import AclMiddleware, AclRegistry
from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.config.launch import register_blueprint
from orkeon_actors.crew.agent import Tool
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.http_guard import CALLER_SCOPE_KEY, HttpGuard, HttpPolicy
from orkeon_actors.lifecycle.supervisor import CrewSupervisor
from orkeon_actors.runtime import Runtime
from orkeon_actors.store.durable_hub import SqliteEventHub

__all__ = ["DEFAULT_CALLER", "A2AConfig", "A2AServer", "listen", "serve_in_thread"]

DEFAULT_CALLER = "a2a"
"""The caller's name when the operator names none (``client://a2a``)."""


@attrs.frozen
class A2AConfig:
    """Where the A2A server listens and who may call it.

    ``port`` (``0``: a free one); ``host`` (127.0.0.1; another address needs
    ``allow_remote=True``, a wildcard one ``allowed_hosts`` too); ``callers``: name ->
    bearer token (at least 16 characters each), each caller being the peer
    ``client://NAME``; none given: one caller named :data:`DEFAULT_CALLER` with a
    fresh token (:attr:`A2AServer.tokens`)."""

    port: int = 0
    host: str = "127.0.0.1"
    callers: Mapping[str, str] = attrs.field(factory=dict)
    allow_remote: bool = False
    allowed_hosts: tuple[str, ...] = attrs.field(default=(), converter=tuple)


class _Caller(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


class _CallerContext(DefaultServerCallContextBuilder):
    """The SDK's call context, its user the caller the guard identified."""

    def build_user(self, request: Request) -> User:
        return _Caller(str(request.scope[CALLER_SCOPE_KEY]))


class A2AServer:
    """Serves the exposed crews of ``runtime`` (a durable one) over A2A (module docstring).

    ``supervisor``: the crew supervisor the crews run under (default: one started here,
    and stopped by :meth:`stop`); ``acl``: the registry of the runtime's ACL stage
    (default: the one of the runtime's :class:`~orkeon_actors.acl.AclMiddleware`).
    Raises ``InvalidArgumentError`` for an in-memory runtime, a runtime without an ACL
    stage and no ``acl``, a bad token or bind address, or a port it cannot listen on."""

    def __init__(
        self,
        runtime: Runtime,
        config: A2AConfig | None = None,
        *,
        supervisor: CrewSupervisor | None = None,
        acl: AclRegistry | None = None,
    ) -> None:
        config = config or A2AConfig()
        if not isinstance(runtime.hub, SqliteEventHub):
            raise InvalidArgumentError(
                "an A2A server keeps its tasks and crews in the store: start the runtime with store='state.db'"
            )
        self.runtime = runtime
        self.hub: SqliteEventHub = runtime.hub
        registry = acl if acl is not None else _acl_of(runtime)
        callers = dict(config.callers) or {DEFAULT_CALLER: secrets.token_urlsafe(32)}
        owner, *others = callers
        self.policy = HttpPolicy(
            config.host,
            token=callers[owner],
            owner=owner,
            callers={name: callers[name] for name in others},
            allow_remote=config.allow_remote,
            allowed_hosts=config.allowed_hosts,
            server="orkeon a2a",
        )
        self.tokens: Mapping[str, str] = callers
        """Each caller's bearer token, by name."""
        self._own_supervisor = supervisor is None
        self.supervisor = supervisor if supervisor is not None else CrewSupervisor.start(runtime)
        self.tasks = CrewTasks(self.supervisor, registry)
        for name in callers:
            self.tasks.add_caller(name)
        ensure_table(self.hub)
        self._socket = listen(config.host, config.port)
        self.port: int = int(self._socket.getsockname()[1])
        self.base_url = f"http://{self.policy.url_host}:{self.port}"
        self._handlers: list[DefaultRequestHandler] = []
        self._push_client = httpx.AsyncClient(timeout=10)
        self._app = Starlette()
        self._guard = HttpGuard(self._app, self.policy)
        self._guard.listening(self.port)
        try:
            self._server, self._thread = serve_in_thread(self._guard, self._socket)
        except InvalidArgumentError:
            self._close_supervisor()
            raise
        self._stopped = False

    def expose(self, blueprint: CrewBlueprint, *, tools: Mapping[str, Tool] | None = None) -> str:
        """Serve ``blueprint`` (which has an ``a2a:`` block) as an A2A agent; returns its
        URL. Registers its factory with the supervisor (``tools`` resolves the tool
        names its agents declare). Raises ``InvalidArgumentError`` for a crew without
        an ``a2a:`` block or one already exposed."""
        if blueprint.a2a is None:
            raise InvalidArgumentError(
                f"crew {blueprint.name!r} has no a2a: block: add one (docs/a2a.md) to serve it as an A2A agent"
            )
        if blueprint.name in self.tasks.blueprints:
            raise InvalidArgumentError(f"crew {blueprint.name!r} is exposed already")
        register_blueprint(self.supervisor, blueprint, tools=tools, acl=self.tasks.acl)
        store = SqliteTaskStore(self.hub, blueprint.name)
        self.tasks.add_crew(blueprint, store)
        url = f"{self.base_url}/{blueprint.name}/"
        card = agent_card(blueprint, url)
        configs = InMemoryPushNotificationConfigStore()
        handler = DefaultRequestHandler(
            CrewExecutor(blueprint, self.tasks),
            store,
            card,
            push_config_store=configs,
            push_sender=BasePushNotificationSender(self._push_client, configs),
        )
        self._handlers.append(handler)
        routes: list[BaseRoute] = [
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/", context_builder=_CallerContext(), enable_v0_3_compat=True),
        ]
        self._app.router.routes.append(Mount(f"/{blueprint.name}", routes=routes))
        self._root_card()
        logger.bind(component="orkeon_actors.a2a").info("crew {} served over A2A at {}", blueprint.name, url)
        return url

    def url(self, crew: str) -> str:
        """The endpoint (and card base) of the exposed crew ``crew``."""
        return f"{self.base_url}/{crew}/"

    def _root_card(self) -> None:
        routes = self._app.router.routes
        routes[:] = [r for r in routes if not getattr(r, "orkeon_root_card", False)]
        if len(self.tasks.blueprints) == 1:
            (only,) = self.tasks.blueprints.values()
            for route in create_agent_card_routes(agent_card(only, self.url(only.name))):
                route.orkeon_root_card = True  # type: ignore[attr-defined]
                routes.insert(0, route)

    def stop(self) -> None:
        """Stop serving; the crews stay in the store (asleep, or restored at the next
        start). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
        self.tasks.close()
        self._close_supervisor()

    def _close_supervisor(self) -> None:
        if self._own_supervisor:
            self.supervisor.stop()


def _acl_of(runtime: Runtime) -> AclRegistry:
    for stage in runtime.middleware:
        if isinstance(stage, AclMiddleware) and stage.registry is not None:
            return stage.registry
    raise InvalidArgumentError(
        "an A2A server needs the runtime's ACL stage, whose registry holds its callers and crews: start the runtime "
        "with middleware=[AclMiddleware(registry)] and pass acl=registry (Runtime.start(a2a=...) adds one)"
    )


def serve_in_thread(app: Any, sock: socket.socket) -> tuple[uvicorn.Server, threading.Thread]:
    """Serve the ASGI ``app`` on the listening ``sock`` with uvicorn, on a daemon thread
    with its own event loop; returns once it accepts connections (stop it with
    ``server.should_exit = True`` and join the thread). ``InvalidArgumentError`` (the
    socket closed) when it did not start."""
    server = uvicorn.Server(
        uvicorn.Config(
            app, lifespan="off", loop="asyncio", log_config=None, access_log=False, timeout_graceful_shutdown=2
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="orkeon-a2a", daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        thread.join(0.01)
    if not server.started:
        sock.close()
        raise InvalidArgumentError(f"the A2A server did not start on {sock.getsockname()}: see the log")
    return server, thread


def listen(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        raise InvalidArgumentError(f"the A2A server cannot listen on {host}:{port}: {exc}") from None
    return sock
