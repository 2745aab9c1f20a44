"""``load_crew``: read a crew from YAML, single-file or multi-file, validated against
the canonical schema with every problem reported at once.

Layouts:

* **single file**: ``load_crew("crew.yaml")``, everything in one document;
* **multi-file**: ``load_crew("crews/newsroom")`` (a directory) reads its ``crew.yaml``
  plus one file per agent. An ``agents:`` entry that is a string names an agent file
  relative to ``crew.yaml`` (``- agents/writer.yaml``); a ``crew.yaml`` without an
  ``agents:`` key takes every ``agents/*.yaml`` beside it, in file-name order. Each
  agent file holds one agent mapping (``id:``, ``model:``, ...).

Every file is read through :mod:`orkeon_actors.guarded_yaml` (regular files, bounded
size, UTF-8, the YAML bounds). A file an ``agents:`` entry names must resolve, ``..``
and symlinks included, inside the crew file's directory; an absolute path is refused
unless it resolves there too. A file that is refused, or that holds something other
than one agent mapping, is named in the error without a word of its content.

Errors (:class:`~orkeon_actors.errors.CrewConfigError`, its ``issues`` one
:class:`~orkeon_actors.config.ConfigIssue` each) name the file the problem is in, its
line and column, the JSON pointer and what was expected::

    agents[2].budget.max_tokens: expected a positive integer, got -5 (crew.yaml:14:20)

``links:`` reads exactly as spec §10.2 says (absent or bare: undeclared; ``[]``:
closes the door); a malformed entry is an error here, or with ``lenient_links=True``
a warning that discards it while the block stays declared.
"""

from __future__ import annotations

import os
from pathlib import Path as FsPath
from typing import Any

from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.config.issues import ConfigIssue, Path, Position, raise_if_any
from orkeon_actors.config.source import SourceMap, read_yaml
from orkeon_actors.errors import ConfigFileError
from orkeon_actors.guarded_yaml import read_config_file

__all__ = ["crew_document", "load_crew"]

CREW_FILE = "crew.yaml"
AGENTS_DIR = "agents"


def _read_file(file: FsPath, issues: list[ConfigIssue]) -> tuple[Any, SourceMap]:
    try:
        data = read_config_file(file, what="the crew file")
    except ConfigFileError as exc:
        issues.append(ConfigIssue((), str(exc), Position(str(file), 1, 1)))
        return None, SourceMap()
    document, source, found = read_yaml(data, str(file))
    issues.extend(found)
    return document, source


def _read_agent_file(
    base: FsPath, entry: str, index: int, issues: list[ConfigIssue], at: Position | None
) -> tuple[Any, SourceMap]:
    """The agent mapping of the file ``entry`` names (inside ``base``), or ``None`` with
    an issue at the entry (``at``) that names the file, never its content."""
    path: Path = ("agents", index)
    try:
        data = read_config_file(entry, within=base, what="the agent file")
    except ConfigFileError as exc:
        issues.append(ConfigIssue(path, str(exc), at))
        return None, SourceMap()
    file = str(base / entry)
    document, source, found = read_yaml(data, file)
    if found:
        issues.extend(ConfigIssue(path, f"the agent file {entry}: {i.message}", i.position) for i in found)
        return None, SourceMap()
    if not isinstance(document, dict):
        kind = "nothing" if document is None else f"a {type(document).__name__}"
        problem = f"the agent file {entry} holds {kind}, not one agent mapping (id:, model:, ...)"
        issues.append(ConfigIssue(path, problem, Position(file, 1, 1)))
        return None, SourceMap()
    return document, source


def crew_document(path: str | os.PathLike[str]) -> tuple[Any, SourceMap, list[ConfigIssue]]:
    """The composed document of the crew at ``path`` (a file, or a directory holding
    ``crew.yaml``), its positions, and the problems met reading the files (the schema
    is not applied yet)."""
    root = FsPath(path)
    file = root / CREW_FILE if root.is_dir() else root
    issues: list[ConfigIssue] = []
    document, source = _read_file(file, issues)
    if issues or not isinstance(document, dict):
        return document, source, issues
    base = file.parent
    entries = document.get("agents")
    if "agents" not in document and (base / AGENTS_DIR).is_dir():
        entries = [f"{AGENTS_DIR}/{p.name}" for p in sorted((base / AGENTS_DIR).glob("*.yaml"))]
        document["agents"] = entries
        source.values[("agents",)] = source.values[()]
    if isinstance(entries, list):
        for index, entry in enumerate(entries):
            if not isinstance(entry, str):
                continue
            at = source.find(("agents", index))
            agent, agent_source = _read_agent_file(base, entry, index, issues, at)
            document["agents"][index] = agent
            source.update(agent_source, ("agents", index))
    return document, source, issues


def load_crew(path: str | os.PathLike[str], *, lenient_links: bool = False) -> CrewBlueprint:
    """The :class:`CrewBlueprint` of the crew YAML at ``path`` (see the module
    docstring). Raises :class:`~orkeon_actors.errors.CrewConfigError` with every
    problem found."""
    document, source, issues = crew_document(path)
    raise_if_any(issues, str(path))
    return CrewBlueprint.from_document(document, source=source, what=str(path), lenient_links=lenient_links)
