"""Middleware: the interceptor chain around delivery (spec §12)."""

from orkeon_actors.middleware.pipeline import (
    EventHubMiddleware,
    Next,
    Pipeline,
    current_operation,
)

__all__ = ["EventHubMiddleware", "Next", "Pipeline", "current_operation"]
