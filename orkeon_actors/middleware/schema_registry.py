"""The event schema registry's public names, beside the stage that uses them.

The registry is a port of the hub's bootstrap (:mod:`orkeon_actors.hub.schema_registry`:
the runtime hands it to every stage in its ``MiddlewareContext``); the validation stage
and plugins import it from here or from :mod:`orkeon_actors.middleware`.
"""

from orkeon_actors.hub.schema_registry import EventSchemaRegistry, InMemoryEventSchemaRegistry

__all__ = ["EventSchemaRegistry", "InMemoryEventSchemaRegistry"]
