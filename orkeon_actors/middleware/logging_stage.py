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

import time
from typing import TYPE_CHECKING

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


class LoggingMiddleware:
    """Logs every message crossing the stage, on both paths, through loguru.

    ``level``: level of ordinary records (default ``"DEBUG"``); ``refusal_level``: level
    of a refusal (default ``"WARNING"``); ``include_payload`` / ``payload_limit``: opt in
    to logging the payload; ``logger``: a loguru logger (default: loguru's global one).

    The stage never swallows an error: a refusal is logged and re-raised unchanged. Its
    cost is loguru's cost of one record per message and path (filtered out early by
    loguru when no sink accepts ``level``).
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
        self._clock: Clock = SystemClock()

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
        latency_ms = (self._clock.now() - message.published_at).total_seconds() * 1000.0
        try:
            result = next(message)
        except DuplicateMessageError as exc:
            self._log(self.level, "receive", message, latency_ms, "dropped", exc)
            raise
        except BaseException as exc:
            self._log(self.refusal_level, "receive", message, latency_ms, "refused", exc)
            raise
        self._log(self.level, "receive", result, latency_ms, "consumed", None)
        return result

    def _log(
        self,
        level: str | int,
        path: str,
        message: Message,
        elapsed_ms: float,
        outcome: str,
        error: BaseException | None,
    ) -> None:
        target = message.target_mailbox or message.target_crew_id
        fields: dict[str, object] = {
            "path": path,
            "operation": current_operation(),
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
        if self.include_payload:
            fields["payload"] = message.payload[: self.payload_limit * 4].decode("utf-8", "replace")[
                : self.payload_limit
            ]
        self._logger.log(level, _TEMPLATE, **fields)

    def __repr__(self) -> str:
        return f"LoggingMiddleware(level={self.level!r}, include_payload={self.include_payload})"
