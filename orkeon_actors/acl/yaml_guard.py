"""Loading crew YAML that may be hostile, in bounded time and memory.

A crew YAML can come from anyone who can write a file the runtime reads. Before the
document is built, :func:`load_bounded_yaml` walks its event stream (ruamel.yaml's
parser is iterative, so no recursion happens on the way) and refuses, with
:class:`~orkeon_actors.acl.links.AclConfigError`:

* a document over :data:`MAX_YAML_BYTES`, or with more than
  :data:`MAX_YAML_FLOW_OPENERS` ``[`` / ``{`` characters anywhere (counted on the raw
  text, strings and comments included: the scanner's cost grows with the square of the
  flow nesting, so this is checked before it runs);
* nesting deeper than :data:`MAX_YAML_DEPTH` (a ``RecursionError`` otherwise);
* a list or a mapping used as a mapping key (``? - a``): the grammar's keys are plain
  text, and such a key cannot even be built into a Python dict;
* any tag outside the YAML core schema (``!!python/object``, ``!custom``...): the
  grammar needs none, and a tag is how a loader is made to run code;
* more than :data:`MAX_YAML_NODES` nodes once aliases are expanded (a billion-laughs
  document is a few hundred bytes that expand to 10^9 nodes).

Then it loads the document with the round-trip loader (which keeps line numbers).
"""

from __future__ import annotations

from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
)

from orkeon_actors.acl.links import AclConfigError

__all__ = ["MAX_YAML_BYTES", "MAX_YAML_DEPTH", "MAX_YAML_FLOW_OPENERS", "MAX_YAML_NODES", "load_bounded_yaml"]

MAX_YAML_BYTES: Final = 1024 * 1024
MAX_YAML_FLOW_OPENERS: Final = 256
MAX_YAML_DEPTH: Final = 64
MAX_YAML_NODES: Final = 100_000

_CORE_TAGS: Final = frozenset(
    "tag:yaml.org,2002:" + name for name in ("str", "int", "float", "bool", "null", "seq", "map")
)


def _tag_text(event: NodeEvent) -> str | None:
    tag = getattr(event, "tag", None)
    if tag is None or isinstance(tag, str):
        return tag
    return str(getattr(tag, "value", tag))


def _is_collection(event: NodeEvent, collection_anchors: set[str]) -> bool:
    if isinstance(event, AliasEvent):
        return str(event.anchor) in collection_anchors
    return isinstance(event, CollectionStartEvent)


def _check_events(yaml: YAML, text: str, source: str) -> None:
    nodes = 0
    anchors: dict[str, int] = {}  # anchor -> expanded node count of its node
    collection_anchors: set[str] = set()
    open_collections: list[tuple[str | None, int]] = []  # (anchor, nodes before it)
    children: list[list[int]] = []  # per open collection: [is a mapping, children so far]
    for event in yaml.parse(text):
        if isinstance(event, NodeEvent):
            tag = _tag_text(event)
            if tag is not None and tag != "!" and tag not in _CORE_TAGS:
                raise AclConfigError(
                    f"{source} uses the tag {tag!r}: tags are not part of the crew YAML grammar; remove it"
                )
            if children:
                is_mapping, count = children[-1]
                if is_mapping and count % 2 == 0 and _is_collection(event, collection_anchors):
                    raise AclConfigError(
                        f"{source} uses a list or a mapping as a mapping key (line {event.start_mark.line + 1}); "
                        "keys are plain text: write `key: value`"
                    )
                children[-1][1] += 1
            if isinstance(event, CollectionStartEvent):
                children.append([isinstance(event, MappingStartEvent), 0])
        if isinstance(event, AliasEvent):
            nodes += anchors.get(str(event.anchor), 1)
        elif isinstance(event, ScalarEvent):
            nodes += 1
            if event.anchor is not None:
                anchors[str(event.anchor)] = 1
        elif isinstance(event, CollectionStartEvent):
            open_collections.append((event.anchor, nodes))
            nodes += 1
            if len(open_collections) > MAX_YAML_DEPTH:
                raise AclConfigError(f"{source} nests deeper than {MAX_YAML_DEPTH} levels (MAX_YAML_DEPTH); flatten it")
        elif isinstance(event, CollectionEndEvent) and open_collections:
            children.pop()
            anchor, before = open_collections.pop()
            if anchor is not None:
                anchors[str(anchor)] = nodes - before
                collection_anchors.add(str(anchor))
        if nodes > MAX_YAML_NODES:
            raise AclConfigError(
                f"{source} expands to more than {MAX_YAML_NODES} nodes (MAX_YAML_NODES) once its aliases are "
                "expanded; write the values out instead of nesting aliases"
            )


def load_bounded_yaml(text: str, source: str) -> Any:
    """The YAML document ``text`` (round-trip loaded), or ``AclConfigError`` for
    invalid YAML, duplicate keys, or input over one of this module's bounds."""
    if not isinstance(text, str):
        raise AclConfigError(f"a crew YAML must be given as a string, got {type(text).__name__}")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise AclConfigError(f"{source} is {size} bytes, over MAX_YAML_BYTES ({MAX_YAML_BYTES}); split it")
    openers = text.count("[") + text.count("{")
    if openers > MAX_YAML_FLOW_OPENERS:
        raise AclConfigError(
            f"{source} has {openers} '[' / '{{' characters, over MAX_YAML_FLOW_OPENERS ({MAX_YAML_FLOW_OPENERS}); "
            "write long lists in block style (one '- item' per line)"
        )
    yaml = YAML(typ="rt")
    try:
        _check_events(yaml, text, source)
        return YAML(typ="rt").load(text)
    except AclConfigError:
        raise
    except YAMLError as exc:
        raise AclConfigError(f"{source} is not valid YAML: {exc}") from None
    except (ValueError, OverflowError) as exc:  # a scalar the constructor cannot build (a 13th month)
        raise AclConfigError(f"{source} has a value that cannot be read: {exc}") from None
