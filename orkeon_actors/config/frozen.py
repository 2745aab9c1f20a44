"""``FrozenJson``: an immutable, hashable JSON object, so a blueprint holding free-form
JSON (model options, tool-call arguments, graph nodes) stays a value."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

__all__ = ["FrozenJson", "freeze", "thaw"]


class FrozenJson(Mapping[str, Any]):
    """A read-only JSON object; nested objects are ``FrozenJson``, lists tuples."""

    __slots__ = ("_data", "_key")

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = {str(k): freeze(v) for k, v in (data or {}).items()}
        self._key = json.dumps(self._data, sort_keys=True, separators=(",", ":"), default=_canonical)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenJson):
            return self._key == other._key
        if isinstance(other, Mapping):
            return self._key == FrozenJson(other)._key
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenJson({thaw(self)!r})"


def _canonical(value: Any) -> Any:
    """What ``json.dumps`` writes for a value it cannot: a nested ``FrozenJson`` as its
    mapping, an attrs value (a model reference) as its fields, tagged by its type."""
    if isinstance(value, FrozenJson):
        return dict(value.items())
    if attrs.has(type(value)):
        return {"__type__": type(value).__name__, **{f.name: getattr(value, f.name) for f in attrs.fields(type(value))}}
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def freeze(value: Any) -> Any:
    """``value`` with dicts as :class:`FrozenJson` and lists as tuples."""
    if isinstance(value, FrozenJson):
        return value
    if isinstance(value, Mapping):
        return FrozenJson(value)
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON value (dicts and lists) of a frozen one."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value
