"""The one YAML loader: every YAML document the project reads (a crew file, its agent
files, the ``links:`` grammar, ``orkeon crew validate`` / ``run``) goes through
:func:`load_yaml`, and every YAML file through :func:`read_config_file` first.

A YAML file can come from anyone who can write a file the runtime reads, so both run in
bounded time and memory and refuse, with a typed error at ``file:line:column``
(:class:`~orkeon_actors.errors.YamlInputError`,
:class:`~orkeon_actors.errors.ConfigFileError`), before anything is built:

* a file that is not a regular file (``/dev/zero``, a FIFO, a directory: checked on the
  open descriptor, opened non-blocking, so a FIFO never hangs), or larger than
  :data:`MAX_YAML_BYTES` (at most that many bytes are ever read); a file a crew refers
  to must also resolve (symlinks included) inside the crew file's directory;
* bytes that are not UTF-8 (a UTF-8 byte-order mark is allowed), and an escaped UTF-16
  surrogate (``"\\ud83d"``: no character, and no UTF-8 encoding);
* a raw U+0085, U+2028 or U+2029 (a line break to YAML 1.1 and to ruamel.yaml's
  scanner, a character to YAML 1.2: the same file would read two ways); escaped in a
  double-quoted string (``\\N``, ``\\L``, ``\\P``) they are read as written;
* more than :data:`MAX_YAML_FLOW_OPENERS` ``[`` / ``{`` characters anywhere (counted on
  the raw text, strings and comments included: ruamel.yaml's scanner costs the square
  of the flow nesting, so this is checked before it runs);
* nesting deeper than :data:`MAX_YAML_DEPTH`;
* a list or a mapping used as a mapping key (``? - a``): keys are plain text;
* any tag outside the YAML core schema (``!!python/object``, ``!!binary``, ``!custom``):
  no crew document needs one, and a tag is how a loader is made to run code;
* more than :data:`MAX_YAML_NODES` nodes, or scalars of more than
  :data:`MAX_YAML_EXPANDED_CHARS` characters in all, once aliases are expanded (a
  billion-laughs document is a few hundred bytes that expand to 10^9 nodes);
* a scalar longer than :data:`MAX_YAML_SCALAR_CHARS`;
* an integer of more than :data:`MAX_YAML_INT_DIGITS` characters (a 5,000-digit
  integer costs quadratic time to convert and fits no field);
* invalid YAML (a duplicate key included).

The checks walk ruamel.yaml's event stream (its parser is iterative: no recursion on
the way); then the document is loaded with the round-trip loader, which keeps line
numbers. Error messages name positions and the rule broken, never the document's lines
(ruamel.yaml's own messages quote them): a refused file's content is not echoed.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, Final, NoReturn

from ruamel.yaml import YAML
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
)
from ruamel.yaml.reader import ReaderError

from orkeon_actors.errors import ConfigFileError, YamlInputError

__all__ = [
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_EXPANDED_CHARS",
    "MAX_YAML_FLOW_OPENERS",
    "MAX_YAML_INT_DIGITS",
    "MAX_YAML_NODES",
    "MAX_YAML_SCALAR_CHARS",
    "load_yaml",
    "read_config_file",
]

MAX_YAML_BYTES: Final = 1024 * 1024
MAX_YAML_FLOW_OPENERS: Final = 256
MAX_YAML_DEPTH: Final = 64
MAX_YAML_NODES: Final = 20_000
MAX_YAML_SCALAR_CHARS: Final = 256 * 1024
MAX_YAML_EXPANDED_CHARS: Final = 4 * 1024 * 1024
MAX_YAML_INT_DIGITS: Final = 40

_CORE_TAGS: Final = frozenset(
    "tag:yaml.org,2002:" + name for name in ("str", "int", "float", "bool", "null", "seq", "map")
)
_INTEGER: Final = re.compile(r"[-+]?(?:[0-9_]+|0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+)")
_BOM: Final = b"\xef\xbb\xbf"
_AMBIGUOUS_BREAK: Final = re.compile("[\x85\u2028\u2029]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _refuse(message: str, file: str, line: int = 0, column: int = 0, *, bound: str = "", limit: int = 0) -> NoReturn:
    where = f"{file}:{line}:{column}" if line else file
    raise YamlInputError(f"{where}: {message}", file=file, line=line, column=column, bound=bound, limit=limit)


def _tag_text(event: NodeEvent) -> str | None:
    tag = getattr(event, "tag", None)
    if tag is None or isinstance(tag, str):
        return tag
    return str(getattr(tag, "value", tag))


class _Walk:
    """The bounds of one document, checked event by event."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.nodes = 0
        self.chars = 0
        self.anchors: dict[str, tuple[int, int]] = {}  # anchor -> expanded (nodes, chars) of its node
        self.collection_anchors: set[str] = set()
        self.open: list[tuple[str | None, int, int]] = []  # (anchor, nodes, chars before it)
        self.children: list[list[int]] = []  # per open collection: [is a mapping, children so far]

    def refuse(
        self, event: NodeEvent | CollectionEndEvent, message: str, *, bound: str = "", limit: int = 0
    ) -> NoReturn:
        mark = event.start_mark
        _refuse(message, self.file, mark.line + 1, mark.column + 1, bound=bound, limit=limit)

    def is_collection(self, event: NodeEvent) -> bool:
        if isinstance(event, AliasEvent):
            return str(event.anchor) in self.collection_anchors
        return isinstance(event, CollectionStartEvent)

    def node(self, event: NodeEvent) -> None:
        tag = _tag_text(event)
        if tag is not None and tag != "!" and tag not in _CORE_TAGS:
            self.refuse(event, "uses a tag; tags are not part of the crew YAML grammar (they are refused): remove it")
        if self.children:
            is_mapping, count = self.children[-1]
            if is_mapping and count % 2 == 0 and self.is_collection(event):
                self.refuse(event, "uses a list or a mapping as a mapping key; keys are plain text: write `key: value`")
            self.children[-1][1] += 1
        if isinstance(event, AliasEvent):
            nodes, chars = self.anchors.get(str(event.anchor), (1, 0))
            self.nodes += nodes
            self.chars += chars
        elif isinstance(event, ScalarEvent):
            self.scalar(event)
        elif isinstance(event, CollectionStartEvent):
            self.children.append([isinstance(event, MappingStartEvent), 0])
            self.open.append((event.anchor, self.nodes, self.chars))
            self.nodes += 1
            if len(self.open) > MAX_YAML_DEPTH:
                self.refuse(
                    event,
                    f"nests deeper than {MAX_YAML_DEPTH} levels (MAX_YAML_DEPTH); flatten it",
                    bound="MAX_YAML_DEPTH",
                    limit=MAX_YAML_DEPTH,
                )

    def scalar(self, event: ScalarEvent) -> None:
        value = event.value
        if len(value) > MAX_YAML_SCALAR_CHARS:
            self.refuse(
                event,
                f"has a scalar of {len(value)} characters, over MAX_YAML_SCALAR_CHARS ({MAX_YAML_SCALAR_CHARS}); "
                "keep long texts in a file of their own",
                bound="MAX_YAML_SCALAR_CHARS",
                limit=MAX_YAML_SCALAR_CHARS,
            )
        if event.style is None and event.tag is None and len(value) > MAX_YAML_INT_DIGITS and _INTEGER.fullmatch(value):
            self.refuse(
                event,
                f"has an integer of {len(value)} characters, over MAX_YAML_INT_DIGITS ({MAX_YAML_INT_DIGITS}); "
                "no field takes one that large (quote it if it is text)",
                bound="MAX_YAML_INT_DIGITS",
                limit=MAX_YAML_INT_DIGITS,
            )
        if _SURROGATE.search(value):
            self.refuse(
                event,
                "escapes a UTF-16 surrogate (\\ud800-\\udfff), which is no character; write the character "
                "itself or its code point (\\U0001F600)",
            )
        self.nodes += 1
        self.chars += len(value)
        if event.anchor is not None:
            self.anchors[str(event.anchor)] = (1, len(value))

    def end(self, event: CollectionEndEvent) -> None:
        if not self.open:
            return
        self.children.pop()
        anchor, nodes, chars = self.open.pop()
        if anchor is not None:
            self.anchors[str(anchor)] = (self.nodes - nodes, self.chars - chars)
            self.collection_anchors.add(str(anchor))

    def check_totals(self, event: NodeEvent | CollectionEndEvent) -> None:
        if self.nodes > MAX_YAML_NODES:
            self.refuse(
                event,
                f"has more than {MAX_YAML_NODES} nodes (MAX_YAML_NODES), aliases expanded; a crew needs far "
                "fewer: split it into files, and write values out instead of nesting aliases",
                bound="MAX_YAML_NODES",
                limit=MAX_YAML_NODES,
            )
        if self.chars > MAX_YAML_EXPANDED_CHARS:
            self.refuse(
                event,
                f"expands to more than {MAX_YAML_EXPANDED_CHARS} characters of scalars (MAX_YAML_EXPANDED_CHARS) "
                "once its aliases are expanded; do not repeat long texts through aliases",
                bound="MAX_YAML_EXPANDED_CHARS",
                limit=MAX_YAML_EXPANDED_CHARS,
            )


def _check_events(text: str, file: str) -> None:
    walk = _Walk(file)
    for event in YAML(typ="rt").parse(text):
        if isinstance(event, NodeEvent):
            walk.node(event)
        elif isinstance(event, CollectionEndEvent):
            walk.end(event)
        else:
            continue
        walk.check_totals(event)


def _decode(data: bytes, file: str) -> str:
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        _refuse(
            f"is not UTF-8 (byte {data[exc.start]:#04x} at byte column {column}); save it as UTF-8",
            file,
            line,
            column,
        )


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _size_check(size: int, file: str) -> None:
    if size > MAX_YAML_BYTES:
        _refuse(
            f"is {size} bytes, over MAX_YAML_BYTES ({MAX_YAML_BYTES}); split it",
            file,
            bound="MAX_YAML_BYTES",
            limit=MAX_YAML_BYTES,
        )


def load_yaml(data: str | bytes, file: str = "<yaml>") -> Any:
    """The YAML document ``data`` (UTF-8 bytes or text), loaded with ruamel.yaml's
    round-trip loader (``CommentedMap`` / ``CommentedSeq``, with positions), after the
    checks of the module docstring. ``file`` names the document in errors. Raises
    :class:`~orkeon_actors.errors.YamlInputError`."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        _size_check(len(raw), file)
        text = _decode(raw, file)
    elif isinstance(data, str):
        text = data
        _size_check(len(text.encode("utf-8", "surrogatepass")), file)
    else:
        raise YamlInputError(f"a YAML document is given as text or bytes, got {type(data).__name__}", file=file)
    ambiguous = _AMBIGUOUS_BREAK.search(text)
    if ambiguous is not None:
        line, column = _position(text, ambiguous.start())
        _refuse(
            f"has a raw U+{ord(ambiguous.group()):04X}, a line break to YAML 1.1 and a character to YAML 1.2; "
            "write it escaped in a double-quoted string (\\N, \\L, \\P)",
            file,
            line,
            column,
        )
    openers = text.count("[") + text.count("{")
    if openers > MAX_YAML_FLOW_OPENERS:
        _refuse(
            f"has {openers} '[' / '{{' characters, over MAX_YAML_FLOW_OPENERS ({MAX_YAML_FLOW_OPENERS}); "
            "write long lists in block style (one '- item' per line)",
            file,
            bound="MAX_YAML_FLOW_OPENERS",
            limit=MAX_YAML_FLOW_OPENERS,
        )
    try:
        _check_events(text, file)
        return YAML(typ="rt").load(text)
    except YamlInputError:
        raise
    except ReaderError as exc:  # a character YAML does not allow (NUL, most C0 controls)
        line, column = _position(text, exc.position)
        _refuse(
            f"has the character U+{exc.character:04X}, which YAML does not allow; remove it",
            file,
            line,
            column,
        )
    except DuplicateKeyError as exc:
        mark = exc.problem_mark
        line, column = (0, 0) if mark is None else (mark.line + 1, mark.column + 1)
        _refuse("is not valid YAML: a duplicate key (the keys of a mapping are unique)", file, line, column)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = "; ".join(str(p) for p in (exc.context, exc.problem) if p) or type(exc).__name__
        if mark is None:
            _refuse(f"is not valid YAML: {problem}", file)
        else:
            _refuse(f"is not valid YAML: {problem}", file, mark.line + 1, mark.column + 1)
    except YAMLError as exc:
        _refuse(f"is not valid YAML ({type(exc).__name__})", file)
    except (ValueError, OverflowError) as exc:  # a scalar the constructor cannot build (a 13th month)
        _refuse(f"has a value that cannot be read ({type(exc).__name__}: {exc})", file)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _inside(path: str | os.PathLike[str], directory: Path, shown: str) -> Path:
    try:
        base = directory.resolve()
        target = (base / path).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a symlink loop, a name too long
        raise ConfigFileError(f"{shown} cannot be resolved ({type(exc).__name__}); name a file", path=shown) from None
    if not target.is_relative_to(base):
        raise ConfigFileError(
            f"{shown} is outside the crew's directory {base} (after resolving '..' and symlinks); "
            "a crew refers only to files in its own directory or below it",
            path=shown,
        )
    return target


def read_config_file(
    path: str | os.PathLike[str], *, within: str | os.PathLike[str] | None = None, what: str = "the file"
) -> bytes:
    """The bytes of the configuration file ``path``, read with the module's file bounds:
    a regular file of at most :data:`MAX_YAML_BYTES`. With ``within`` (a directory),
    ``path`` is taken relative to it and must resolve, symlinks included, inside it.
    ``what`` names the file in errors (``"agents[2]"``). Raises
    :class:`~orkeon_actors.errors.ConfigFileError`; its message never holds content."""
    shown = os.fspath(path)
    target = Path(path) if within is None else _inside(path, Path(within), f"{what} {shown}")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if within is not None:
        flags |= getattr(os, "O_NOFOLLOW", 0)  # resolved already: a symlink now is a swap
    try:
        fd = os.open(target, flags)
    except ValueError:  # a NUL byte in the path
        raise ConfigFileError(f"cannot read {what} {shown!r}: the path holds a NUL byte", path=shown) from None
    except OSError as exc:
        raise ConfigFileError(f"cannot read {what} {shown}: {exc.strerror or type(exc).__name__}", path=shown) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigFileError(f"{what} {shown} is {_kind(info.st_mode)}; a crew file is a regular file", path=shown)
        if info.st_size > MAX_YAML_BYTES:
            raise ConfigFileError(
                f"{what} {shown} is {info.st_size} bytes, over MAX_YAML_BYTES ({MAX_YAML_BYTES}); split it",
                path=shown,
            )
        chunks: list[bytes] = []
        left = MAX_YAML_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ConfigFileError(f"cannot read {what} {shown}: {exc.strerror or type(exc).__name__}", path=shown) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_YAML_BYTES:
        raise ConfigFileError(
            f"{what} {shown} grew past MAX_YAML_BYTES ({MAX_YAML_BYTES}) while it was read; split it", path=shown
        )
    return data
