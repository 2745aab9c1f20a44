"""The envelope of a message on an AMQP broker (the distributed hub's format to come).

Datetime rule: the tool format's (:data:`~orkeon_actors.wire.tool_json.TOOL_DATETIMES`):
ISO 8601 UTC with microseconds and ``Z``; an offset is required on input, since a
message from another process must not leave its instant to the reader's zone.

A :class:`~orkeon_actors.model.message.Message` is a table of its fields under their own
names (what an AMQP headers table holds: strings, ``None`` for absent fields, metadata
as a nested table) with the payload, unchanged bytes, under ``body`` (the AMQP message
body). Ids read back are validated: a broker is not this process.
"""

from __future__ import annotations

import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from orkeon_actors.model.message import Message
from orkeon_actors.wire.base import base_converter
from orkeon_actors.wire.tool_json import TOOL_DATETIMES

__all__ = ["AMQP_DATETIMES", "amqp_envelope_converter", "configure_amqp_envelope"]

AMQP_DATETIMES = TOOL_DATETIMES


def configure_amqp_envelope(converter: cattrs.Converter) -> cattrs.Converter:
    """Register the AMQP envelope's ``Message`` hooks on ``converter`` (a
    :func:`~orkeon_actors.wire.base.base_converter` with :data:`AMQP_DATETIMES`).
    Returns ``converter``."""
    body = override(rename="body")
    converter.register_structure_hook(bytes, lambda value, _: bytes(value))
    converter.register_unstructure_hook(Message, make_dict_unstructure_fn(Message, converter, payload=body))
    converter.register_structure_hook(Message, make_dict_structure_fn(Message, converter, payload=body))
    return converter


def amqp_envelope_converter() -> cattrs.Converter:
    """A new converter of the AMQP envelope (unknown keys refused)."""
    return configure_amqp_envelope(base_converter(AMQP_DATETIMES, forbid_extra_keys=True))
