"""orkeon-payload-schema: refuse published payloads that break their declared contract.

The built-in :class:`~orkeon_actors.middleware.ValidationMiddleware` checks only that a
declared ``schema_id`` is registered (spec §12.3). This stage goes further: it decodes
the payload as JSON and validates it against the registered JSON Schema with
``jsonschema``, on the publish path, so a malformed event never reaches a subscriber::

    import orkeon_actors as ok
    from orkeon_payload_schema import PayloadSchemaMiddleware

    rt = ok.Runtime.start(middleware=[PayloadSchemaMiddleware()])      # or "payload_schema"
    rt.schema_registry.register("order.created.v1", {"type": "object", "required": ["id"]})
    client.publish("orders.created", {"id": 1}, ok.PublishOptions(schema_id="order.created.v1"))
"""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from orkeon_actors.errors import EventValidationError
from orkeon_actors.middleware import EventSchemaRegistry, MiddlewareContext, Next
from orkeon_actors.model.message import NO_DECLARED_SCHEMA_ID, Message

__all__ = ["PayloadSchemaMiddleware"]
__version__ = "0.1.0"


class PayloadSchemaMiddleware:
    """Validates, on publish, the JSON payload of every message declaring a schema.

    ``registry``: where schemas are looked up; ``None`` (default) uses the runtime's
    (``rt.schema_registry``) once attached. ``check_formats``: also enforce ``format``
    keywords (``"email"``, ``"date-time"``...) with jsonschema's format checker.

    Guarantees and failure modes, all raised to the caller of ``publish`` as
    :class:`~orkeon_actors.errors.EventValidationError` (the message reaches nobody):

    * the declared id is not registered;
    * the registered schema is not a valid JSON Schema (its own ``$schema`` dialect,
      Draft 2020-12 when it declares none), or references something unresolvable;
    * the payload is not JSON;
    * the payload does not conform (the error names the failing value's JSON path and
      the schema rule).

    Messages declaring no schema (``"_none"``: every post, send and reply) and the
    receive path pass untouched. Compiled validators are cached per schema id in an
    immutable snapshot (registrations never change, by the registry contract).
    """

    def __init__(self, registry: EventSchemaRegistry | None = None, *, check_formats: bool = False) -> None:
        self._registry = registry
        self._own_registry = registry is not None
        self.check_formats = check_formats
        self._validators: dict[str, Validator] = {}

    def attach(self, context: MiddlewareContext) -> None:
        """Adopt the runtime's schema registry unless one was given."""
        if not self._own_registry:
            self._registry = context.schema_registry
            self._validators = {}

    def detach(self) -> None:
        """Forget the runtime's registry and the validators compiled from it."""
        if not self._own_registry:
            self._registry = None
            self._validators = {}

    def on_publish(self, message: Message, next: Next) -> Message:
        """Pass ``message`` on if it declares no schema or its payload conforms; raise
        ``EventValidationError`` otherwise."""
        schema_id = message.schema_id
        if schema_id == NO_DECLARED_SCHEMA_ID:
            return next(message)
        validator = self._validators.get(schema_id) or self._compile(schema_id, message)
        try:
            document = message.json()
        except ValueError as exc:
            raise EventValidationError(
                f"message on topic {message.topic!r} declares schema {schema_id!r} but its payload is not "
                f"JSON ({exc}); publish a JSON-serialisable value"
            ) from None
        try:
            error = best_match(validator.iter_errors(document))
        except Unresolvable as exc:
            raise EventValidationError(
                f"schema {schema_id!r} references something that cannot be resolved ({exc}); "
                "register a self-contained schema"
            ) from None
        if error is not None:
            rule = "/".join(str(part) for part in error.schema_path) or "(root)"
            raise EventValidationError(
                f"payload of the message on topic {message.topic!r} does not conform to schema "
                f"{schema_id!r}: {error.message} (at {error.json_path}, rule {rule})"
            )
        return next(message)

    def on_receive(self, message: Message, next: Next) -> Message:
        """Receive traffic is not validated: passes ``message`` on."""
        return next(message)

    def _compile(self, schema_id: str, message: Message) -> Validator:
        registry = self._registry
        schema = None if registry is None else registry.get(schema_id)
        if schema is None:
            raise EventValidationError(
                f"message on topic {message.topic!r} declares schema_id {schema_id!r}, which is not "
                "registered: register it (rt.schema_registry.register(schema_id, schema)) or fix the id"
            )
        schema = json.loads(json.dumps(schema))  # a plain-dict copy, whatever mapping type the registry returns
        cls = validator_for(schema, default=Draft202012Validator)
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            raise EventValidationError(
                f"the schema registered under {schema_id!r} is not a valid JSON Schema "
                f"({cls.__name__}): {exc.message}; fix it and register it under a new id"
            ) from None
        validator: Validator = cls(schema, format_checker=cls.FORMAT_CHECKER if self.check_formats else None)
        self._validators = {**self._validators, schema_id: validator}
        return validator

    def __repr__(self) -> str:
        return f"PayloadSchemaMiddleware(check_formats={self.check_formats})"
