"""Stage 5, validation (spec §12.3): a declared contract must exist.

A message whose ``schema_id`` is not ``"_none"`` declares a contract; the stage refuses
it on the publish path, with ``EventValidationError``, unless that id is registered in the
:class:`~orkeon_actors.hub.schema_registry.EventSchemaRegistry`. It does not check
that the payload conforms to the schema (see ``plugins/orkeon-payload-schema`` for that).
Messages declaring no contract (``"_none"``: every post, send and reply) pass untouched,
and the receive path is never checked: a subscriber cannot fix a schema someone else
declared.
"""

from __future__ import annotations

from orkeon_actors.errors import EventValidationError
from orkeon_actors.hub.pipeline import MiddlewareContext, Next
from orkeon_actors.hub.schema_registry import EventSchemaRegistry
from orkeon_actors.model.message import NO_DECLARED_SCHEMA_ID, Message

__all__ = ["ValidationMiddleware"]


class ValidationMiddleware:
    """Refuses, on publish, a message declaring a schema id nobody registered.

    ``registry``: the registry to consult; ``None`` (the default) uses the runtime's
    (``Runtime.start(schema_registry=...)``, reachable as ``rt.schema_registry``) once the
    stage is attached. A stage with no registry refuses every declared schema id.

    Cost: a message declaring no schema costs one string comparison. Registrations are
    add-only (the registry contract), so the stage remembers the ids it has seen
    registered in an immutable snapshot swapped on change: the registry is consulted at
    most once per declared id that exists, and on every message whose id does not.
    """

    def __init__(self, registry: EventSchemaRegistry | None = None) -> None:
        self._registry = registry
        self._own_registry = registry is not None
        self._known: frozenset[str] = frozenset()

    @property
    def registry(self) -> EventSchemaRegistry | None:
        """The registry this stage consults (``None`` until attached, if none was given)."""
        return self._registry

    def attach(self, context: MiddlewareContext) -> None:
        """Adopt the runtime's schema registry unless one was given at construction."""
        if not self._own_registry:
            self._registry = context.schema_registry
            self._known = frozenset()

    def detach(self) -> None:
        """Forget the runtime's registry (a stage given its own registry keeps it)."""
        if not self._own_registry:
            self._registry = None
            self._known = frozenset()

    def on_publish(self, message: Message, next: Next) -> Message:
        """Pass ``message`` on if it declares no schema or a registered one; raise
        ``EventValidationError`` otherwise."""
        schema_id = message.schema_id
        if schema_id == NO_DECLARED_SCHEMA_ID or schema_id in self._known:
            return next(message)
        registry = self._registry
        if registry is None or registry.get(schema_id) is None:
            raise EventValidationError(
                f"message on topic {message.topic!r} declares schema_id {schema_id!r}, which is not "
                "registered: register it first (rt.schema_registry.register(schema_id, schema)), fix the "
                f"id, or publish without a schema_id ({NO_DECLARED_SCHEMA_ID!r})"
            )
        self._known = self._known | {schema_id}
        return next(message)

    def on_receive(self, message: Message, next: Next) -> Message:
        """Receive traffic is not validated: passes ``message`` on."""
        return next(message)

    def __repr__(self) -> str:
        return f"ValidationMiddleware({self._registry!r})"
