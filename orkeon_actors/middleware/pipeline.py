"""The pipeline's public names, where stage authors look for them.

The pipeline itself belongs to the hub (:mod:`orkeon_actors.hub.pipeline`: the hub
composes it around delivery, and a layer never imports the one above it); stages import
``Next``, ``current_operation`` and the rest from here or from
:mod:`orkeon_actors.middleware`.
"""

from orkeon_actors.hub.pipeline import (
    PUBLISH_OPERATIONS,
    RECEIVE_OPERATIONS,
    EventHubMiddleware,
    MiddlewareContext,
    Next,
    Pipeline,
    current_operation,
    is_stage,
)

__all__ = [
    "PUBLISH_OPERATIONS",
    "RECEIVE_OPERATIONS",
    "EventHubMiddleware",
    "MiddlewareContext",
    "Next",
    "Pipeline",
    "current_operation",
    "is_stage",
]
