"""Middleware plugins: stages installed as separate packages, found by entry point.

A plugin package declares, in its ``pyproject.toml``::

    [project.entry-points."orkeon_actors.middleware"]
    rate_limit = "orkeon_rate_limit:RateLimitMiddleware"

The entry point names a *factory*: a class or function that, called with keyword
arguments (or none), returns a stage (an object with ``on_publish`` and ``on_receive``).

Using plugins::

    ok.middleware.discover()                       # {"rate_limit": MiddlewarePlugin(...), ...}
    stage = ok.middleware.load("rate_limit", rate=5.0, burst=10)   # configured instance
    ok.Runtime.start(middleware=[LoggingMiddleware(), "rate_limit", stage2])

In ``Runtime.start(middleware=[...])`` a string is the name of an installed plugin,
instantiated without arguments at that position of the chain: the registration order is
the order of the list, whatever mixes objects and names. Nothing is loaded unless named:
an installed plugin never joins a runtime on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import attrs

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.pipeline import EventHubMiddleware, is_stage

__all__ = ["ENTRY_POINT_GROUP", "MiddlewarePlugin", "discover", "load", "resolve_stages"]

ENTRY_POINT_GROUP = "orkeon_actors.middleware"


@attrs.frozen
class MiddlewarePlugin:
    """One installed plugin: its entry point ``name``, the ``value`` it points to
    (``module:attribute``) and the distribution that declared it."""

    name: str
    value: str
    distribution: str | None
    version: str | None
    entry_point: EntryPoint = attrs.field(repr=False, eq=False)

    def factory(self) -> Callable[..., Any]:
        """Import the plugin and return its factory. Raises ``InvalidArgumentError`` if
        the import fails or the entry point does not name a callable."""
        try:
            factory = self.entry_point.load()
        except Exception as exc:  # any import-time failure of third-party code, reported with its cause
            raise InvalidArgumentError(
                f"middleware plugin {self.name!r} ({self.value}, from {self.distribution or 'unknown'}) "
                f"failed to import: {type(exc).__name__}: {exc}"
            ) from exc
        if not callable(factory):
            raise InvalidArgumentError(
                f"middleware plugin {self.name!r} points to {self.value}, which is not callable; "
                "an entry point of the group orkeon_actors.middleware must name a stage class or factory"
            )
        return factory  # type: ignore[no-any-return]

    def create(self, **config: Any) -> EventHubMiddleware:
        """Instantiate the stage with ``config``. Raises ``TypeError`` when the factory
        does not return a stage."""
        stage = self.factory()(**config)
        if not is_stage(stage):
            raise TypeError(
                f"middleware plugin {self.name!r} ({self.value}) returned {stage!r}, which has no "
                "on_publish(message, next) / on_receive(message, next)"
            )
        return stage  # type: ignore[no-any-return]


def discover() -> dict[str, MiddlewarePlugin]:
    """Every installed plugin of the group ``orkeon_actors.middleware``, by name, sorted.

    Imports nothing. Raises ``InvalidArgumentError`` when two installed distributions
    declare the same name (uninstall one: a name must mean one stage).
    """
    found: dict[str, MiddlewarePlugin] = {}
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        dist = entry_point.dist
        plugin = MiddlewarePlugin(
            entry_point.name,
            entry_point.value,
            None if dist is None else dist.name,
            None if dist is None else dist.version,
            entry_point,
        )
        other = found.get(plugin.name)
        if other is not None and (other.value, other.distribution) != (plugin.value, plugin.distribution):
            raise InvalidArgumentError(
                f"two installed packages declare the middleware plugin {plugin.name!r}: "
                f"{other.distribution} ({other.value}) and {plugin.distribution} ({plugin.value}); "
                "uninstall one of them"
            )
        found[plugin.name] = plugin
    return dict(sorted(found.items()))


def load(name: str, /, **config: Any) -> EventHubMiddleware:
    """Instantiate the installed plugin ``name`` with ``config`` (keyword arguments of
    its factory). Raises ``InvalidArgumentError`` when no such plugin is installed (the
    message lists those that are) or it fails to import, ``TypeError`` when the factory
    rejects ``config`` or does not return a stage."""
    plugins = discover()
    plugin = plugins.get(name)
    if plugin is None:
        installed = ", ".join(plugins) or "none"
        raise InvalidArgumentError(
            f"no middleware plugin named {name!r} is installed (installed: {installed}); install the "
            f"package that provides it, or check the name against ok.middleware.discover()"
        )
    return plugin.create(**config)


def resolve_stages(stages: Sequence[EventHubMiddleware | str]) -> list[EventHubMiddleware]:
    """``stages`` with every name (a string) replaced by its installed plugin,
    instantiated without arguments (:func:`load`), in order. Objects pass unchanged (the
    :class:`~orkeon_actors.hub.pipeline.Pipeline` then checks they are stages). Raises
    ``InvalidArgumentError`` for a name no installed plugin has."""
    return [load(stage) if isinstance(stage, str) else stage for stage in stages]
