"""The library's logging convention.

``orkeon_actors`` logs through `loguru <https://loguru.readthedocs.io>`_ and, being a
library, is **silent by default**: importing it calls ``logger.disable("orkeon_actors")``,
so a program sees no line from the runtime until it asks. The application decides:

* :func:`enable_logging` turns the runtime's records on and sends them (at ``level`` and
  above) to a sink: ``sys.stderr`` by default, any loguru sink otherwise (a file path, a
  callable, a ``logging.Handler``);
* :class:`StdlibPropagateHandler` is the bridge to the standard ``logging`` module: used
  as the sink, every record is re-emitted on the stdlib logger of the same name
  (``orkeon_actors.store.writer``, ...), so the application's ``logging`` configuration
  (handlers, levels, formatters) applies to it;
* the ``orkeon`` command enables warnings on stderr, and everything with ``-v``.

:func:`disable_logging` undoes :func:`enable_logging`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from loguru import logger

__all__ = ["LOG_FORMAT", "StdlibPropagateHandler", "disable_logging", "enable_logging"]

PACKAGE = "orkeon_actors"

LOG_FORMAT = "{time:YYYY-MM-DDTHH:mm:ss.SSSSSS!UTC}Z | {level: <8} | {name}:{function}:{line} - {message}"
"""The format of a sink :func:`enable_logging` adds (unless given ``format=``): the time
in RFC 3339 UTC with ``Z``, as every timestamp the runtime shows a person or a model."""

_handlers: list[int] = []


def enable_logging(level: str | int = "INFO", sink: Any = None, **options: Any) -> int:
    """Turn the runtime's log records on and send those at ``level`` or above to ``sink``
    (``sys.stderr`` when ``None``; ``options`` go to ``loguru.logger.add``, e.g.
    ``format=``; the default is :data:`LOG_FORMAT`, except for a ``logging.Handler``,
    whose own formatter applies). Only records of ``orkeon_actors`` reach this sink.
    Returns the loguru handler id. Raises ``ValueError`` for an unknown level name.

    loguru's own default handler (id 0, everything to stderr at DEBUG), if the program
    has not removed it yet, is removed first: it would print every record a second
    time, whatever ``level`` says."""
    try:
        logger.remove(0)
    except ValueError:
        pass  # already removed: the program configures loguru itself
    logger.enable(PACKAGE)
    if not isinstance(sink, logging.Handler):
        options.setdefault("format", LOG_FORMAT)
    handler_id = logger.add(sys.stderr if sink is None else sink, level=level, filter=PACKAGE, **options)
    _handlers.append(handler_id)
    return handler_id


def disable_logging() -> None:
    """Silence the runtime again and remove every sink :func:`enable_logging` added."""
    logger.disable(PACKAGE)
    while _handlers:
        try:
            logger.remove(_handlers.pop())
        except ValueError:
            pass  # the program removed it already (logger.remove())


class StdlibPropagateHandler(logging.Handler):
    """A loguru sink re-emitting each record on the stdlib logger of the same name.

    ``ok.enable_logging("INFO", sink=StdlibPropagateHandler(), format="{message}")``:
    the records then go through ``logging``'s handlers, levels and filters like the
    application's own (``logging.getLogger("orkeon_actors").setLevel(...)`` applies)."""

    def emit(self, record: logging.LogRecord) -> None:
        target = logging.getLogger(record.name)
        if target.isEnabledFor(record.levelno):
            target.handle(record)


logger.disable(PACKAGE)
