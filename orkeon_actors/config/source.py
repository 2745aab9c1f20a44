"""Reading YAML with positions: ruamel.yaml's round-trip loader gives every mapping key,
value and list item its line and column; :func:`read_yaml` returns the document as
plain Python values plus a :class:`SourceMap` from paths to positions, so a schema
error can name ``crew.yaml:14:20``.

Every document is read by the one guarded loader (:mod:`orkeon_actors.guarded_yaml`):
a document it refuses (not UTF-8, invalid YAML, a duplicate key, a tag, over a bound)
yields only that issue, at the position the loader reports: nothing after it can be read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from orkeon_actors.config.issues import ConfigIssue, Path, Position
from orkeon_actors.errors import YamlInputError
from orkeon_actors.guarded_yaml import load_yaml

__all__ = ["SourceMap", "read_yaml", "to_plain"]


@attrs.define
class SourceMap:
    """Positions of a document's values (``values``) and mapping keys (``keys``)."""

    values: dict[Path, Position] = attrs.field(factory=dict)
    keys: dict[Path, Position] = attrs.field(factory=dict)

    def update(self, other: SourceMap, prefix: Path = ()) -> None:
        """Take ``other``'s positions, its paths moved under ``prefix``."""
        for path, position in other.values.items():
            self.values[prefix + path] = position
        for path, position in other.keys.items():
            self.keys[prefix + path] = position

    def find(self, path: Path, *, key: bool = False) -> Position | None:
        """The position of ``path`` (of its key with ``key=True`` when known), else of
        its nearest ancestor."""
        if key and path in self.keys:
            return self.keys[path]
        for end in range(len(path), -1, -1):
            found = self.values.get(path[:end])
            if found is not None:
                return found
        return None


def to_plain(node: Any, file: str, path: Path = (), source: SourceMap | None = None) -> Any:
    """``node`` (from the round-trip loader) as plain dicts, lists, str, int, float,
    bool and None, recording positions in ``source``."""
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key in node:
            child = (*path, str(key))
            if source is not None:
                kl, kc = node.lc.key(key)
                vl, vc = node.lc.value(key)
                source.keys[child] = Position(file, kl + 1, kc + 1)
                source.values[child] = Position(file, vl + 1, vc + 1)
            out[str(key)] = to_plain(node[key], file, child, source)
        return out
    if isinstance(node, CommentedSeq):
        items: list[Any] = []
        for index, item in enumerate(node):
            child = (*path, index)
            if source is not None:
                line, col = node.lc.item(index)
                source.values[child] = Position(file, line + 1, col + 1)
            items.append(to_plain(item, file, child, source))
        return items
    if isinstance(node, Mapping):
        return {str(k): to_plain(v, file, (*path, str(k)), source) for k, v in node.items()}
    if isinstance(node, Sequence) and not isinstance(node, (str, bytes)):
        return [to_plain(v, file, (*path, i), source) for i, v in enumerate(node)]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node  # a timestamp or binary scalar: the schema reports its type


def read_yaml(text: str | bytes, file: str) -> tuple[Any, SourceMap, list[ConfigIssue]]:
    """Parse ``text`` (UTF-8 bytes or text, named ``file`` in positions):
    ``(document, positions, issues)``; a refused document gives ``(None, positions,
    [its issue])``."""
    source = SourceMap()
    try:
        node = load_yaml(text, file)
    except YamlInputError as exc:
        position = Position(file, exc.line, exc.column) if exc.line else Position(file, 1, 1)
        message = str(exc).removeprefix(f"{file}:{exc.line}:{exc.column}: " if exc.line else f"{file}: ")
        return None, source, [ConfigIssue((), message, position)]
    source.values[()] = Position(file, 1, 1)
    return to_plain(node, file, (), source), source, []
