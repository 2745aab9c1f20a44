"""The crew snapshot's JSON format (spec §8.1): how model values appear in a snapshot.

Datetime rule: RFC 3339 in UTC with ``Z`` (:func:`~orkeon_actors.model.clock.format_utc`),
the one timestamp format a person reads (``orkeon store PATH show CREW`` prints
snapshots), read back with ``datetime.fromisoformat`` (any ISO 8601 Python writes), so
snapshots written by earlier releases (``+00:00`` offsets) load unchanged.

A :class:`~orkeon_actors.model.message.Message` (kept mail, handover events) is an
object with its fields under their own names, the payload in standard base64. The crew
layer (:mod:`orkeon_actors.crew.snapshot`) registers its records and tagged unions on
the converter :func:`snapshot_converter` returns.

Compactness (snapshot ``schema_version`` 3 on): a field whose value equals its
declared default is left out (a ``null`` limit, an empty list, a zero counter), and
read back as that default; a field without a default is always written. The text is
JSON without insignificant whitespace (:func:`dumps`). Earlier snapshots, which wrote
every field, read unchanged: a key present always wins over the default.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any, Final

import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from orkeon_actors.model.clock import format_utc
from orkeon_actors.model.message import Message
from orkeon_actors.wire.base import DatetimeRule, base_converter

__all__ = ["SNAPSHOT_DATETIMES", "configure_snapshot", "dumps", "snapshot_converter"]

SNAPSHOT_DATETIMES: Final = DatetimeRule(
    "RFC 3339 in UTC with Z; any ISO 8601 read (earlier snapshots wrote +00:00)",
    format=format_utc,
    parse=datetime.fromisoformat,
)


def _b64encode(payload: bytes) -> str:
    return base64.b64encode(payload).decode("ascii")


def _b64decode(text: str, _: type) -> bytes:
    return base64.b64decode(text)


def configure_snapshot(converter: cattrs.Converter) -> cattrs.Converter:
    """Register the snapshot format's own hooks on ``converter`` (a
    :func:`~orkeon_actors.wire.base.base_converter` with :data:`SNAPSHOT_DATETIMES`):
    ``Any`` passes through (tool results kept as JSON values) and ``Message`` is an
    object of its fields with a base64 payload. Returns ``converter``."""
    converter.register_structure_hook(Any, lambda value, _: value)
    converter.register_unstructure_hook(
        Message,
        make_dict_unstructure_fn(
            Message,
            converter,
            _cattrs_omit_if_default=converter.omit_if_default,
            payload=override(unstruct_hook=_b64encode),
        ),
    )
    converter.register_structure_hook(
        Message, make_dict_structure_fn(Message, converter, payload=override(struct_hook=_b64decode))
    )
    return converter


def snapshot_converter() -> cattrs.Converter:
    """A new converter of the snapshot format (unknown keys refused, fields equal to
    their default omitted)."""
    return configure_snapshot(base_converter(SNAPSHOT_DATETIMES, forbid_extra_keys=True, omit_if_default=True))


def dumps(data: object) -> str:
    """A snapshot's JSON text: keys sorted, no insignificant whitespace, ASCII only
    (so any string, lone surrogates included, encodes to UTF-8)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
