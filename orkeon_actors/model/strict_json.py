"""Reading JSON from untrusted sources, strictly.

:func:`loads_strict` is the one JSON reader of input an agent (or any caller) controls:
tool arguments and the payloads a tool hands back to a model. Beyond ``json.loads`` it

* refuses nesting deeper than ``MAX_JSON_DEPTH`` before the parser recurses into it
  (``LimitExceededError``, never ``RecursionError``);
* refuses ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON: an LLM API would reject a
  tool result carrying them), and numbers too large for a float (``1e999``);
* refuses duplicate keys in an object (two readers could disagree on which one wins).

Everything else it refuses raises ``InvalidArgumentError`` saying what was wrong.
"""

from __future__ import annotations

import json
import math
from typing import Any

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.limits import check_json_text_depth

__all__ = ["loads_strict"]


def _refuse_constant(name: str) -> Any:
    raise InvalidArgumentError(f"{name} is not a JSON number: send a finite number, or a string")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidArgumentError(f"the number {text[:40]} is too large for a double; send it as a string")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise InvalidArgumentError(f"the key {duplicate[:64]!r} appears twice in one JSON object; give each key once")
    return result


def loads_strict(text: str | bytes) -> Any:
    """Parse ``text`` as strict JSON (see the module docstring). Raises
    ``LimitExceededError`` for too deep a document, ``InvalidArgumentError`` for
    anything else that is not strict JSON (the message says what)."""
    check_json_text_depth(text)
    try:
        return json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
        )
    except InvalidArgumentError:
        raise
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the int-digits limit
        raise InvalidArgumentError(f"not valid JSON: {exc}") from None
