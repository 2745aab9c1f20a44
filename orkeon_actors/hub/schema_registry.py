"""The event schema registry (spec §3.3 ``IEventSchemaRegistry``, §12.3).

A registry maps a ``schema_id`` (what a message declares in ``Message.schema_id``) to a
JSON Schema document. The built-in :class:`~orkeon_actors.middleware.ValidationMiddleware`
only checks that a declared id is registered; checking that a payload conforms to the
schema is the job of a plugin (``plugins/orkeon-payload-schema``).

Contract of every registry (the :class:`EventSchemaRegistry` protocol):

* ``register(schema_id, schema)``: registering an id again with an equal schema is a
  no-op; with a different schema it raises ``EventValidationError`` (publish a new
  version under a new id instead). Registrations are add-only: an id, once registered,
  stays registered for the registry's lifetime (stages may remember that it exists).
* ``get(schema_id)``: the registered schema, or ``None``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from orkeon_actors.errors import EventValidationError, InvalidArgumentError
from orkeon_actors.model.message import NO_DECLARED_SCHEMA_ID

__all__ = ["EventSchemaRegistry", "InMemoryEventSchemaRegistry"]


@runtime_checkable
class EventSchemaRegistry(Protocol):
    """The port: where declared event contracts live (see the module docstring)."""

    def register(self, schema_id: str, schema: Mapping[str, Any]) -> None:
        """Register ``schema`` under ``schema_id``; idempotent for an equal schema,
        ``EventValidationError`` for a different one."""
        ...

    def get(self, schema_id: str) -> Mapping[str, Any] | None:
        """The schema registered under ``schema_id``, or ``None``."""
        ...


def _canonical(schema_id: str, schema: object) -> str:
    if not isinstance(schema, Mapping):
        raise InvalidArgumentError(
            f"the schema registered under {schema_id!r} must be a JSON object (a mapping), got {type(schema).__name__}"
        )
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"the schema registered under {schema_id!r} is not JSON-serialisable: {exc}"
        ) from None


class InMemoryEventSchemaRegistry:
    """A process-local :class:`EventSchemaRegistry`. Thread-safe.

    The registry keeps its own copy of each schema, taken at registration (later changes
    to the caller's object do not reach it), and ``get`` returns a fresh copy each time
    (a caller cannot alter a registered schema through it). Two schemas are "the same"
    when they are equal as JSON documents (key order does not matter).

    Raises ``InvalidArgumentError`` for an empty id, for the reserved ``"_none"`` (the
    id of messages that declare no contract) and for a schema that is not a JSON object.
    """

    def __init__(self, schemas: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._lock = threading.Lock()
        self._schemas: dict[str, str] = {}
        for schema_id, schema in (schemas or {}).items():
            self.register(schema_id, schema)

    def register(self, schema_id: str, schema: Mapping[str, Any]) -> None:
        """Register ``schema`` under ``schema_id``.

        Same id and equal schema: no-op. Same id and a different schema:
        ``EventValidationError`` (the registered one stays)."""
        if not isinstance(schema_id, str) or not schema_id:
            raise InvalidArgumentError(f"a schema id must be a non-empty string, got {schema_id!r}")
        if schema_id == NO_DECLARED_SCHEMA_ID:
            raise InvalidArgumentError(
                f"{NO_DECLARED_SCHEMA_ID!r} is reserved for messages that declare no schema; "
                "register your schema under its own id"
            )
        canonical = _canonical(schema_id, schema)
        with self._lock:
            existing = self._schemas.get(schema_id)
            if existing is None:
                self._schemas[schema_id] = canonical
                return
        if existing != canonical:
            raise EventValidationError(
                f"schema id {schema_id!r} is already registered with a different schema; a registered "
                f"contract never changes: register the new version under a new id (for example "
                f"{schema_id + '.v2'!r}) and declare that id in new messages"
            )

    def get(self, schema_id: str) -> dict[str, Any] | None:
        """A copy of the schema registered under ``schema_id``, or ``None``."""
        canonical = self._schemas.get(schema_id)
        if canonical is None:
            return None
        schema: dict[str, Any] = json.loads(canonical)
        return schema

    def __contains__(self, schema_id: object) -> bool:
        return schema_id in self._schemas

    def __len__(self) -> int:
        return len(self._schemas)

    def ids(self) -> list[str]:
        """The registered schema ids, sorted."""
        return sorted(self._schemas)

    def __repr__(self) -> str:
        return f"InMemoryEventSchemaRegistry({len(self._schemas)} schemas)"
