"""Stage 1, logging (spec §12): one structured loguru record per message and path.

Registered first, the stage sees on the publish path everything a later stage refuses;
on the receive path (reverse order) it runs last, so a duplicate the idempotency stage
drops never reaches it (the hub's own debug line covers that case).

Every record carries, in ``record["extra"]``:

* ``component``: ``"orkeon_actors.event_hub"`` (filter your sinks on it);
* ``path``: ``"publish"`` or ``"receive"``; ``operation``: ``publish``, ``post``,
  ``send``, ``reply``, ``subscribe``, ``wait`` or ``receive``;
* ``topic``, ``message_id``, ``source_crew``, ``target`` (mailbox address, else target
  crew, else ``None``), ``correlation_id`` (or ``None``), ``schema_id``;
* ``elapsed_ms``: on the publish path, the time the rest of the chain and the hand-off
  took in the caller's thread (``time.perf_counter``: a cost, not a timestamp, so it is
  real time even under a virtual clock); on the receive path, the time from
  ``published_at`` to consumption on the runtime's clock (a virtual clock gives virtual
  milliseconds);
* ``outcome``: ``accepted`` / ``refused`` (publish), ``consumed`` / ``dropped`` /
  ``refused`` (receive); a refusal adds ``error`` (the exception type) and ``reason``.

The payload is never logged unless ``include_payload=True`` (then as UTF-8 text,
truncated to ``payload_limit`` characters).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from loguru import logger as _default_logger

from orkeon_actors.errors import DuplicateMessageError, InvalidArgumentError
from orkeon_actors.hub.pipeline import MiddlewareContext, Next, current_operation
from orkeon_actors.model.clock import Clock, SystemClock
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from loguru import Logger

__all__ = ["LoggingMiddleware", "LOG_COMPONENT"]

LOG_COMPONENT = "orkeon_actors.event_hub"
"""The ``component`` bound on every record the stage emits."""

_TEMPLATE = "hub {path} {operation} {topic} {message_id} {outcome} ({elapsed_ms:.3f} ms)"

_FIELDS: Final = (
    "path",
    "operation",
    "topic",
    "message_id",
    "source_crew",
    "target",
    "correlation_id",
    "schema_id",
    "elapsed_ms",
    "outcome",
)


class _Pending(threading.local):
    """The record being logged on this thread: ``current`` is ``[inputs, fields]``, the
    fields built on first use.

    Ordinary records go through ``logger.opt(lazy=True)`` with one prebuilt getter per
    field, all reading this slot: loguru calls the getters only after it decided that
    some sink takes the record (level and ``logger.enable`` checks), so a record no
    sink wants costs one attribute write and one call, and its fields are never built.
    The first getter builds them all (:meth:`fields`); a sink sees exactly the record
    an eager call would have produced."""

    current: list[Any] | None = None

    def fields(self) -> dict[str, object]:
        current = self.current
        assert current is not None
        built: dict[str, object] | None = current[1]
        if built is None:
            stage, path, message, elapsed_ms, outcome, operation = current[0]
            if elapsed_ms is None:  # a consumption: its latency, taken now (the record is kept)
                elapsed_ms = stage.latency_ms(message)
            built = current[1] = _fields(path, operation, message, elapsed_ms, outcome, None)
            if stage.include_payload:
                built["payload"] = _payload(message, stage.payload_limit)
        return built


def _fields(
    path: str, operation: str, message: Message, elapsed_ms: float, outcome: str, error: BaseException | None
) -> dict[str, object]:
    target = message.target_mailbox or message.target_crew_id
    fields: dict[str, object] = {
        "path": path,
        "operation": operation,
        "topic": message.topic,
        "message_id": str(message.id),
        "source_crew": str(message.source_crew_id),
        "target": None if target is None else str(target),
        "correlation_id": None if message.correlation_id is None else str(message.correlation_id),
        "schema_id": message.schema_id,
        "elapsed_ms": elapsed_ms,
        "outcome": outcome,
    }
    if error is not None:
        fields["error"] = type(error).__name__
        fields["reason"] = str(error)
    return fields


def _payload(message: Message, limit: int) -> str:
    return message.payload[: limit * 4].decode("utf-8", "replace")[:limit]


class LoggingMiddleware:
    """Logs every message crossing the stage, on both paths, through loguru.

    ``level``: level of ordinary records (default ``"DEBUG"``); ``refusal_level``: level
    of a refusal (default ``"WARNING"``); ``include_payload`` / ``payload_limit``: opt in
    to logging the payload; ``logger``: a loguru logger (default: loguru's global one).

    The stage never swallows an error: a refusal is logged and re-raised unchanged. Its
    cost is loguru's cost of one record per message and path; when no sink accepts
    ``level`` (or the library's logging is disabled) loguru drops the record before its
    fields are built (see ``_Pending``), about 1 µs per record.
    """

    def __init__(
        self,
        level: str | int = "DEBUG",
        *,
        refusal_level: str | int = "WARNING",
        include_payload: bool = False,
        payload_limit: int = 1024,
        logger: Logger | None = None,
    ) -> None:
        if payload_limit < 0:
            raise InvalidArgumentError(f"payload_limit must be >= 0, got {payload_limit}")
        self.level = level
        self.refusal_level = refusal_level
        self.include_payload = include_payload
        self.payload_limit = payload_limit
        self._logger = (logger or _default_logger).bind(component=LOG_COMPONENT)
        self._lazy_logger = self._logger.opt(lazy=True)
        self._pending = _Pending()
        names = (*_FIELDS, "payload") if include_payload else _FIELDS
        self._getters: dict[str, Callable[[], object]] = {name: self._getter(name) for name in names}
        self._clock: Clock = SystemClock()

    def _getter(self, name: str) -> Callable[[], object]:
        pending = self._pending
        return lambda: pending.fields()[name]

    def attach(self, context: MiddlewareContext) -> None:
        """Measure receive latency on the runtime's clock."""
        self._clock = context.clock

    def detach(self) -> None:
        """Back to the system clock."""
        self._clock = SystemClock()

    def on_publish(self, message: Message, next: Next) -> Message:
        started = time.perf_counter()
        try:
            result = next(message)
        except BaseException as exc:
            self._log(self.refusal_level, "publish", message, (time.perf_counter() - started) * 1000.0, "refused", exc)
            raise
        self._log(self.level, "publish", result, (time.perf_counter() - started) * 1000.0, "accepted", None)
        return result

    def on_receive(self, message: Message, next: Next) -> Message:
        try:
            result = next(message)
        except DuplicateMessageError as exc:
            self._log(self.level, "receive", message, self.latency_ms(message), "dropped", exc)
            raise
        except BaseException as exc:
            self._log(self.refusal_level, "receive", message, self.latency_ms(message), "refused", exc)
            raise
        self._log(self.level, "receive", result, None, "consumed", None)  # latency taken if a sink keeps it
        return result

    def latency_ms(self, message: Message) -> float:
        """Milliseconds from ``message``'s ``published_at`` to now, on the runtime's clock."""
        return (self._clock.now() - message.published_at).total_seconds() * 1000.0

    def _log(
        self,
        level: str | int,
        path: str,
        message: Message,
        elapsed_ms: float | None,
        outcome: str,
        error: BaseException | None,
    ) -> None:
        if error is not None:  # a refusal or a drop (rare): logged eagerly, with the error
            assert elapsed_ms is not None
            fields = _fields(path, current_operation(), message, elapsed_ms, outcome, error)
            if self.include_payload:
                fields["payload"] = _payload(message, self.payload_limit)
            self._logger.log(level, _TEMPLATE, **fields)
            return
        self._pending.current = [(self, path, message, elapsed_ms, outcome, current_operation()), None]
        self._lazy_logger.log(level, _TEMPLATE, **self._getters)

    def __repr__(self) -> str:
        return f"LoggingMiddleware(level={self.level!r}, include_payload={self.include_payload})"
