"""Durations in crew documents: ``30s`` / ``5m`` / ``1h`` / ``1d`` / ``500ms``, ISO 8601
(``PT5M``, ``P1DT2H``), or a positive number of seconds.

:func:`parse_duration` reads one into seconds (the schema has already checked its
shape; anything else raises :class:`~orkeon_actors.errors.InvalidArgumentError`).
:func:`format_duration` writes seconds back in the shortest exact unit form, so
``parse_duration(format_duration(s)) == s`` for every positive ``s``.
"""

from __future__ import annotations

import re
from typing import Final

from orkeon_actors.errors import InvalidArgumentError

__all__ = ["format_duration", "parse_duration"]

_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SHORT_RE: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)\Z")
_ISO_RE: Final = re.compile(
    r"P(?!\Z)(?:(\d+(?:\.\d+)?)D)?(?:T(?=\d)(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?\Z"
)


def parse_duration(value: object) -> float:
    """Seconds in ``value`` (see the module docstring). Raises
    ``InvalidArgumentError`` for anything that is not a positive duration."""
    seconds: float
    if isinstance(value, bool):
        raise InvalidArgumentError(f"a duration is a number of seconds or a string such as 30s, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        short = _SHORT_RE.match(value)
        iso = _ISO_RE.match(value)
        if short is not None:
            count, unit = float(short.group(1)), short.group(2)
            seconds = count / 1000 if unit == "ms" else count * _UNITS[unit]
        elif iso is not None:
            days, hours, minutes, secs = (float(g) if g else 0.0 for g in iso.groups())
            seconds = days * 86400 + hours * 3600 + minutes * 60 + secs
        else:
            raise InvalidArgumentError(
                f"{value!r} is not a duration: write 500ms, 30s, 5m, 1h, 1d or ISO 8601 such as PT5M"
            )
    else:
        raise InvalidArgumentError(f"a duration is a number of seconds or a string such as 30s, got {value!r}")
    if not seconds > 0 or seconds == float("inf"):
        raise InvalidArgumentError(f"a duration must be positive and finite, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str | float:
    """The shortest exact text for ``seconds`` (``300`` -> ``"5m"``); a value no unit
    writes exactly (a fraction of a millisecond) stays a number of seconds."""
    for unit in ("d", "h", "m", "s", "ms"):
        count = seconds / _UNITS[unit] if unit != "ms" else seconds * 1000
        if count >= 1 and count == int(count):
            text = f"{int(count)}{unit}"
            if parse_duration(text) == seconds:
                return text
    return seconds
