"""The ``links:`` grammar (spec §10.2): reading a crew's links from its YAML.

``links:`` sits at the flat root of a crew YAML, beside ``name:`` and ``agents:`` (or in
``crew.yaml`` of the multi-file layout)::

    name: billing-crew
    links:
      - to: fraud-crew
        direction: bidirectional
        allowed_topics: [fraud.check, fraud.result]
      - to: "client:studio"
        direction: outbound
      - to: "a2a://weather"          # an external A2A agent (docs/a2a-calling.md)
        direction: bidirectional

How each shape reads (every rule errs towards a closed door):

* no ``links:`` key, or a bare ``links:`` with no value (YAML null): **never declared**.
  The bare key cannot be told apart from an absent one, so it reads the same; a warning
  says so. Write ``links: []`` to close the door.
* ``links: []``: declared and empty, which refuses every inter-crew message.
* a list: declared. Each entry must be a mapping with ``to:`` (a non-empty string: a
  crew ``name:``, ``client:NAME``, or ``a2a:NAME`` / ``a2a://NAME`` for an external
  A2A agent), ``direction:`` (exactly ``outbound``, ``inbound``
  or ``bidirectional``) and optionally ``allowed_topics:`` (a list of topics; absent,
  null or empty means every topic). An entry that breaks any of this (no ``to:``, a
  missing or unreadable ``direction:``, an ``allowed_topics:`` that is not a list of
  topics, an unknown key such as a misspelt ``allowed_topic:``) is **discarded with a
  warning**, never repaired, and the block stays declared: discarded entries never
  reopen the door they were meant to open narrowly.
* any other value (a mapping, a string, a number): declared with no usable link, plus a
  warning. A block nobody can read closes the door.

Warnings are logged with loguru (level WARNING) and kept on the result
(:attr:`LinksBlock.warnings`), so a loader or a test can inspect them. YAML syntax errors,
duplicate keys and a missing or invalid ``name:`` are errors
(:class:`~orkeon_actors.acl.links.AclConfigError`), not warnings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from loguru import logger

from orkeon_actors.acl.links import AclConfigError, AclYamlError, CrewLink, Direction, validate_crew_name
from orkeon_actors.errors import YamlInputError
from orkeon_actors.guarded_yaml import load_yaml, read_config_file

__all__ = [
    "CrewSpec",
    "LinkWarning",
    "LinksBlock",
    "load_crew_file",
    "load_crew_yaml",
    "load_links",
    "merge_duplicate_links",
    "parse_links",
]

_ENTRY_KEYS = ("to", "direction", "allowed_topics")


@attrs.frozen
class LinkWarning:
    """Why part of a ``links:`` block was discarded.

    ``index`` is the 0-based position of the discarded entry in the block (``None`` when
    the warning is about the block as a whole); ``line`` the 1-based line in the YAML
    source when known.
    """

    message: str
    index: int | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.message}"


def _narrower(a: CrewLink, b: CrewLink) -> CrewLink | None:
    """What both ``a`` and ``b`` (same peer) authorize, or ``None`` if nothing: the
    directions both allow, and the topics both allow (an empty list allows every topic;
    two lists keep only the patterns they share, which neither widens)."""
    if a.direction is Direction.BIDIRECTIONAL:
        direction = b.direction
    elif b.direction is Direction.BIDIRECTIONAL or b.direction is a.direction:
        direction = a.direction
    else:
        return None
    if not a.allowed_topics or not b.allowed_topics:
        topics = a.allowed_topics or b.allowed_topics
    else:
        topics = tuple(dict.fromkeys(t for t in a.allowed_topics if t in b.allowed_topics))
        if not topics:
            return None
    return CrewLink(a.to, direction, topics)


def merge_duplicate_links(
    links: Sequence[CrewLink], lines: Sequence[int | None] | None = None
) -> tuple[tuple[CrewLink, ...], tuple[LinkWarning, ...]]:
    """One link per peer: entries naming the same ``to:`` are read as the narrowest
    grant all of them make (:func:`_narrower`), never a wider one than any single entry,
    and dropped if they share nothing. Returns the links (first position of each peer)
    and one warning per duplicated peer, with the entries' lines when known."""
    positions: dict[str, list[int]] = {}
    for index, link in enumerate(links):
        positions.setdefault(link.to, []).append(index)
    if all(len(indexes) == 1 for indexes in positions.values()):
        return tuple(links), ()
    merged: list[CrewLink] = []
    warnings: list[LinkWarning] = []
    for to, indexes in positions.items():
        reading: CrewLink | None = links[indexes[0]]
        for index in indexes[1:]:
            reading = _narrower(reading, links[index]) if reading is not None else None
        if len(indexes) > 1:
            where = [lines[i] if lines is not None and i < len(lines) else None for i in indexes]
            at = ", ".join(
                f"#{i + 1}" + (f" (line {line})" if line is not None else "")
                for i, line in zip(indexes, where, strict=True)
            )
            outcome = f"read as {reading}" if reading is not None else "they authorize nothing in common: no link"
            warnings.append(
                LinkWarning(
                    f"links entries {at} all name {to!r}; one peer gets one link, the narrowest reading of all "
                    f"of them: {outcome}. Write a single entry for {to!r}",
                    indexes[1],
                    where[1],
                )
            )
        if reading is not None:
            merged.append(reading)
    return tuple(merged), tuple(warnings)


def _link_tuple(value: Iterable[CrewLink]) -> tuple[CrewLink, ...]:
    return tuple(value)


def _warning_tuple(value: Iterable[LinkWarning]) -> tuple[LinkWarning, ...]:
    return tuple(value)


@attrs.frozen
class LinksBlock:
    """A crew's declaration, as the ACL reads it.

    * ``declared``: whether the crew declared a ``links:`` block at all. An undeclared
      crew is governed by the policy's default (spec §10.2 rule 2); a declared one is
      held to ``links`` (rule 3), an empty tuple refusing every inter-crew message.
    * ``links``: the entries that could be read, in order.
    * ``warnings``: one per discarded entry (and for a bare ``links:``). Not part of
      equality: two blocks that authorize the same traffic are equal.
    """

    declared: bool
    links: tuple[CrewLink, ...] = attrs.field(default=(), converter=_link_tuple)
    warnings: tuple[LinkWarning, ...] = attrs.field(default=(), converter=_warning_tuple, eq=False)

    def __attrs_post_init__(self) -> None:
        if not self.declared and self.links:
            raise AclConfigError("an undeclared links block cannot carry links; use declared=True")
        for link in self.links:
            if not isinstance(link, CrewLink):
                raise AclConfigError(f"links must be CrewLink values, got {link!r}")
        merged, warnings = merge_duplicate_links(self.links)
        if warnings:  # built in Python with one peer named twice: read it narrowly here too
            for warning in warnings:
                logger.warning("links: {}", warning)
            object.__setattr__(self, "links", merged)
            object.__setattr__(self, "warnings", (*self.warnings, *warnings))

    @classmethod
    def undeclared(cls) -> LinksBlock:
        """The block of a crew that never declared ``links:``."""
        return _UNDECLARED

    @classmethod
    def of(cls, links: Iterable[CrewLink]) -> LinksBlock:
        """A declared block holding ``links`` (``LinksBlock.of([])`` closes the door)."""
        return cls(True, tuple(links))


_UNDECLARED = LinksBlock(False)


@attrs.frozen
class CrewSpec:
    """What the ACL needs from a crew YAML: its ``name:`` and its ``links:`` block."""

    name: str
    links: LinksBlock


def _line_of(container: object, *, item: int | None = None, key: str | None = None) -> int | None:
    """The 1-based source line of a sequence item or a mapping key, when the value came
    from ruamel.yaml's round-trip loader (plain Python values have no position)."""
    lc = getattr(container, "lc", None)
    if lc is None:
        return None
    try:
        position = lc.item(item) if item is not None else lc.key(key)
    except (KeyError, IndexError, TypeError):
        return None
    return int(position[0]) + 1


def _read_entry(entry: object) -> CrewLink | str:
    """The link an entry describes, or the reason it must be discarded."""
    if not isinstance(entry, Mapping):
        return f"is not a mapping with to: and direction: (got {entry!r})"
    unknown = [key for key in entry if key not in _ENTRY_KEYS]
    if unknown:
        return (
            f"has unknown key(s) {', '.join(repr(k) for k in unknown)}: the keys of a link are "
            "to, direction and allowed_topics (an unread key could be a restriction nobody applied)"
        )
    to = entry.get("to")
    if to is None:
        return (
            "has no to:; name the peer crew by its name: (or client:NAME for an external peer, "
            "a2a://NAME for an external A2A agent)"
        )
    if not isinstance(to, str):
        return f'has a to: that is not a string ({to!r}); quote it: to: "{to}"'
    if "direction" not in entry or entry["direction"] is None:
        return "has no direction:; write outbound, inbound or bidirectional (a direction is never guessed)"
    topics = entry.get("allowed_topics")
    if topics is not None and (isinstance(topics, (str, bytes)) or not isinstance(topics, Sequence)):
        return f"has an allowed_topics: that is not a list ({topics!r}); write allowed_topics: [{topics!s}]"
    try:
        return CrewLink(to, entry["direction"], topics)
    except AclConfigError as exc:
        return str(exc)


def parse_links(value: object, *, crew: str | None = None, present: bool = True) -> LinksBlock:
    """Read the value of a ``links:`` key (as loaded from YAML) into a :class:`LinksBlock`.

    ``present`` says whether the key exists at all (``False`` reads as never declared);
    ``crew`` names the crew in warnings. Never raises for a malformed block or entry:
    see the module docstring for how each shape reads. Every warning is also logged.
    """
    who = f"crew {crew!r}" if crew is not None else "a crew"
    if not present:
        return _UNDECLARED
    if value is None:
        warning = LinkWarning(
            "a bare links: with no value reads as never declared (the policy's default applies); "
            "write links: [] to refuse every inter-crew message"
        )
        logger.warning("links: of {}: {}", who, warning)
        return LinksBlock(False, (), (warning,))
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        warning = LinkWarning(
            f"links: must be a list of entries, got {type(value).__name__} {value!r}; the block is "
            "still a declaration, so it authorizes nothing until it is fixed"
        )
        logger.warning("links: of {}: {}", who, warning)
        return LinksBlock(True, (), (warning,))
    links: list[CrewLink] = []
    lines: list[int | None] = []
    warnings: list[LinkWarning] = []
    for index, entry in enumerate(value):
        result = _read_entry(entry)
        if isinstance(result, CrewLink):
            links.append(result)
            lines.append(_line_of(value, item=index))
            continue
        warning = LinkWarning(
            f"links entry #{index + 1} {result}; the entry is discarded and authorizes nothing",
            index,
            _line_of(value, item=index),
        )
        logger.warning("links: of {}: {}", who, warning)
        warnings.append(warning)
    merged, duplicates = merge_duplicate_links(links, lines)
    for warning in duplicates:
        logger.warning("links: of {}: {}", who, warning)
    return LinksBlock(True, merged, (*warnings, *duplicates))


def _load_document(text: str | bytes, source: str) -> Any:
    """The document, through the one guarded loader (:mod:`orkeon_actors.guarded_yaml`)."""
    if not isinstance(text, (str, bytes)):
        raise AclConfigError(f"a crew YAML must be given as a string, got {type(text).__name__}")
    try:
        return load_yaml(text, source)
    except YamlInputError as exc:
        raise AclYamlError(
            str(exc), file=exc.file, line=exc.line, column=exc.column, bound=exc.bound, limit=exc.limit
        ) from None


def _root(document: Any, source: str) -> Mapping[str, Any]:
    if not isinstance(document, Mapping):
        raise AclConfigError(
            f"{source} must be a mapping at its root (name:, agents:, links:), got {type(document).__name__}"
        )
    return document


def load_links(text: str | bytes, *, source: str = "<crew yaml>") -> LinksBlock:
    """The ``links:`` block of a crew YAML document given as text (``name:`` is not
    required here). Raises :class:`AclConfigError` if the text is not YAML or its root is
    not a mapping."""
    root = _root(_load_document(text, source), source)
    name = root.get("name")
    return parse_links(root.get("links"), crew=name if isinstance(name, str) else None, present="links" in root)


def load_crew_yaml(text: str | bytes, *, source: str = "<crew yaml>") -> CrewSpec:
    """Read a crew YAML document (flat root: ``name:``, ``agents:``, ``links:``) into a
    :class:`CrewSpec`.

    Raises :class:`AclConfigError` for invalid YAML (duplicate keys included), a root
    that is not a mapping, or a missing or invalid ``name:``. A malformed ``links:`` block
    never raises: see :func:`parse_links`.
    """
    root = _root(_load_document(text, source), source)
    if "name" not in root:
        nested = (
            " (it nests everything under crew:, the not-built design shape of spec §13.3)" if ("crew" in root) else ""
        )
        raise AclConfigError(
            f"{source} has no name: at its root{nested}; the links: grammar reads a flat root: "
            "name:, agents: and links: side by side"
        )
    name = validate_crew_name(root["name"], what=f"name: in {source}")
    return CrewSpec(name, parse_links(root.get("links"), crew=name, present="links" in root))


def load_crew_file(path: str | os.PathLike[str]) -> CrewSpec:
    """Read a crew YAML file; a directory is the multi-file layout and its ``crew.yaml``
    is read. Raises :class:`~orkeon_actors.errors.ConfigFileError` if the file cannot be
    read or is not a regular file within the bounds of :mod:`orkeon_actors.guarded_yaml`,
    and :class:`AclConfigError` as :func:`load_crew_yaml` does."""
    file = Path(path)
    if file.is_dir():
        file = file / "crew.yaml"
    return load_crew_yaml(read_config_file(file, what="the crew file"), source=str(file))
