"""Middleware: the interceptor chain around delivery (spec §12).

The pipeline (:mod:`~orkeon_actors.hub.pipeline`), the five built-in stages, the
event schema registry and plugin discovery::

    from orkeon_actors.middleware import (
        LoggingMiddleware, TelemetryMiddleware, AclMiddleware,
        IdempotencyMiddleware, ValidationMiddleware,
    )
    rt = ok.Runtime.start(middleware=[LoggingMiddleware(), TelemetryMiddleware(), AclMiddleware(),
                                      IdempotencyMiddleware(), ValidationMiddleware()])

``TelemetryMiddleware`` (OpenTelemetry) and ``AclMiddleware`` (``orkeon_actors.acl``) are
imported on first use, so a runtime that does not use them does not pay their import.
See ``docs/middleware.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orkeon_actors.hub.pipeline import (
    PUBLISH_OPERATIONS,
    RECEIVE_OPERATIONS,
    EventHubMiddleware,
    MiddlewareContext,
    Next,
    Pipeline,
    current_operation,
)
from orkeon_actors.hub.schema_registry import EventSchemaRegistry, InMemoryEventSchemaRegistry
from orkeon_actors.lazy import lazy_attributes
from orkeon_actors.middleware.discovery import ENTRY_POINT_GROUP, MiddlewarePlugin, discover, load
from orkeon_actors.middleware.idempotency import DEFAULT_IDEMPOTENCY_CAPACITY, IdempotencyMiddleware
from orkeon_actors.middleware.logging_stage import LoggingMiddleware
from orkeon_actors.middleware.validation import ValidationMiddleware

if TYPE_CHECKING:
    from orkeon_actors.acl.stage import AclMiddleware
    from orkeon_actors.middleware.genai import AgentTelemetry, observe_agents
    from orkeon_actors.middleware.telemetry import TelemetryMiddleware

__all__ = [
    "DEFAULT_IDEMPOTENCY_CAPACITY",
    "ENTRY_POINT_GROUP",
    "PUBLISH_OPERATIONS",
    "RECEIVE_OPERATIONS",
    "AclMiddleware",
    "AgentTelemetry",
    "EventHubMiddleware",
    "EventSchemaRegistry",
    "IdempotencyMiddleware",
    "InMemoryEventSchemaRegistry",
    "LoggingMiddleware",
    "MiddlewareContext",
    "MiddlewarePlugin",
    "Next",
    "Pipeline",
    "TelemetryMiddleware",
    "ValidationMiddleware",
    "current_operation",
    "discover",
    "load",
    "observe_agents",
]

_LAZY = {
    "TelemetryMiddleware": "orkeon_actors.middleware.telemetry",
    "AgentTelemetry": "orkeon_actors.middleware.genai",
    "observe_agents": "orkeon_actors.middleware.genai",
    "AclMiddleware": "orkeon_actors.acl.stage",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
