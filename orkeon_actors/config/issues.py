"""``ConfigIssue``: one problem found in a crew document, and the error that carries
all of them (:class:`~orkeon_actors.errors.CrewConfigError`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from orkeon_actors.errors import CrewConfigError

__all__ = ["ConfigIssue", "Path", "Position", "raise_if_any", "pointer_of", "dotted"]

Path = tuple[str | int, ...]
"""Where a value sits in a document: keys and list indexes from the root."""


@attrs.frozen
class Position:
    """A 1-based line and column in a source file."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def pointer_of(path: Path) -> str:
    """The RFC 6901 JSON pointer of ``path`` (``/agents/2/budget/max_tokens``)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def dotted(path: Path) -> str:
    """``agents[2].budget.max_tokens``: the path as people read it."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document root)"


@attrs.frozen
class ConfigIssue:
    """One problem: ``path`` (and its JSON ``pointer``), ``message`` (what was expected
    and what was found), ``position`` (file:line:column, when the document came from a
    file or text with positions)."""

    path: Path
    message: str
    position: Position | None = None

    @property
    def pointer(self) -> str:
        return pointer_of(self.path)

    def __str__(self) -> str:
        where = f" ({self.position})" if self.position is not None else ""
        return f"{dotted(self.path)}: {self.message}{where}"

    def to_dict(self) -> dict[str, Any]:
        """The issue as JSON (``orkeon crew validate --json``)."""
        position = self.position
        return {
            "pointer": self.pointer,
            "path": dotted(self.path),
            "message": self.message,
            "file": None if position is None else position.file,
            "line": None if position is None else position.line,
            "column": None if position is None else position.column,
        }


def raise_if_any(issues: Iterable[ConfigIssue], what: str) -> None:
    """Raise :class:`CrewConfigError` listing every issue, if there is one."""
    found: Sequence[ConfigIssue] = tuple(issues)
    if not found:
        return
    lines = "\n".join(f"  - {issue}" for issue in found)
    count = f"{len(found)} problem{'s' if len(found) > 1 else ''}"
    raise CrewConfigError(f"{what} is not a valid crew ({count}):\n{lines}", tuple(found))
