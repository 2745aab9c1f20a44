"""Rows ⇄ values for the store: the row format of :mod:`orkeon_actors.wire.store_row`.

:data:`converter` is the row format's converter (ISO 8601 UTC text of fixed width,
metadata as JSON text, ids and addresses as strings, BLOB payloads); the store's records
(:mod:`orkeon_actors.store.records`) structure through it. A
:class:`~orkeon_actors.model.message.Message` is stored as an envelope
(:data:`ENVELOPE_COLUMNS`, :func:`envelope`, :func:`message_from_row`).
"""

from __future__ import annotations

from typing import Final

import cattrs

from orkeon_actors.wire.store_row import (
    ENVELOPE_COLUMNS,
    EnvelopeRow,
    envelope,
    envelope_columns,
    format_time,
    message_from_row,
    metadata_json,
    parse_time,
    store_row_converter,
)

__all__ = [
    "ENVELOPE_COLUMNS",
    "EnvelopeRow",
    "converter",
    "envelope",
    "envelope_columns",
    "format_time",
    "message_from_row",
    "metadata_json",
    "parse_time",
]

converter: Final[cattrs.Converter] = store_row_converter()
