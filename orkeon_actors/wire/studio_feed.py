"""The Studio feed's message fields: how a message appears in the live web view's events.

Datetime rule: RFC 3339 in UTC with microseconds and a ``Z``
(:func:`~orkeon_actors.model.clock.format_utc`, fixed width), as the tool format; the
feed is written only, never read back.

A :class:`~orkeon_actors.model.message.Message` is its ids and parties under the names
the page reads (``message_id``, ``crew``, ``agent``, ``to_crew``, ``to``, ``topic``,
``correlation_id``, ``published_at``) and a payload *preview*: at most
:data:`PREVIEW_BYTES` bytes decoded leniently (invalid UTF-8 replaced), ``…`` appended
when cut. Metadata and the schema id are not shown.
"""

from __future__ import annotations

from typing import Any, Final

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

from orkeon_actors.model.message import Message
from orkeon_actors.wire.base import base_converter
from orkeon_actors.wire.tool_json import TOOL_DATETIMES

__all__ = ["PREVIEW_BYTES", "configure_studio_feed", "feed_message_fields", "payload_preview"]

PREVIEW_BYTES: Final = 240
"""The most payload bytes a feed event shows."""


def payload_preview(payload: bytes) -> str:
    """``payload`` as the feed shows it (module docstring)."""
    preview = payload[:PREVIEW_BYTES].decode("utf-8", "replace")
    return preview + "…" if len(payload) > PREVIEW_BYTES else preview


def configure_studio_feed(converter: cattrs.Converter) -> cattrs.Converter:
    """Register the feed's ``Message`` hook on ``converter`` (a
    :func:`~orkeon_actors.wire.base.base_converter` with the tool format's datetime
    rule). Returns ``converter``."""
    converter.register_unstructure_hook(
        Message,
        make_dict_unstructure_fn(
            Message,
            converter,
            id=override(rename="message_id"),
            source_crew_id=override(rename="crew"),
            source_agent_id=override(rename="agent"),
            target_crew_id=override(rename="to_crew"),
            target_mailbox=override(rename="to"),
            payload=override(unstruct_hook=payload_preview),
            metadata=override(omit=True),
            schema_id=override(omit=True),
        ),
    )
    return converter


_unstructure: Final = configure_studio_feed(base_converter(TOOL_DATETIMES)).get_unstructure_hook(Message)


def feed_message_fields(message: Message) -> dict[str, Any]:
    """The feed fields describing ``message`` (module docstring)."""
    fields: dict[str, Any] = _unstructure(message)
    return fields
