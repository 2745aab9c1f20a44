"""The one converter between blueprint values (:mod:`orkeon_actors.config.spec`) and
the canonical crew document (plain JSON: what the schema validates, what YAML and
TypeScript write).

* :func:`structure` reads a document *already validated by the schema* (so every value
  has its declared type); durations become seconds, ``links:`` is read by the ACL's own
  grammar (:func:`orkeon_actors.acl.parse_links`, spec §10.2), model options and graph
  nodes are frozen.
* :func:`unstructure` writes the canonical document: keys in schema order, defaults
  omitted, durations in their shortest exact unit (``300`` -> ``5m``). So
  ``structure(unstructure(bp)) == bp`` for every blueprint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from orkeon_actors.acl.grammar import LinksBlock, parse_links
from orkeon_actors.acl.links import CrewLink
from orkeon_actors.config.durations import format_duration, parse_duration
from orkeon_actors.config.frozen import FrozenJson, thaw
from orkeon_actors.config.spec import (
    AutonomousSpec,
    ConsensualSpec,
    EdgeSpec,
    GraphSpec,
    HierarchicalSpec,
    JsonScalar,
    ModelRef,
    OrchestrationSpec,
    ParallelSpec,
    Seconds,
    SequentialSpec,
)

__all__ = [
    "MODES",
    "format_duration",
    "links_to_document",
    "links_to_document_entry",
    "structure",
    "structure_links",
    "unstructure",
]

MODES: dict[str, type[Any]] = {
    cls.mode: cls for cls in (SequentialSpec, HierarchicalSpec, ParallelSpec, ConsensualSpec, GraphSpec, AutonomousSpec)
}
"""Orchestration mode name -> its spec class."""

_RENAMES: dict[type[Any], dict[str, str]] = {EdgeSpec: {"source": "from", "target": "to"}}

_converter = cattrs.Converter(forbid_extra_keys=True)
_converter.register_structure_hook(Seconds, lambda value, _: Seconds(parse_duration(value)))
_converter.register_structure_hook(FrozenJson, lambda value, _: FrozenJson(value))
_converter.register_structure_hook_func(lambda t: t == JsonScalar, lambda value, _: value)


def _structure_model(value: Mapping[str, Any], _: object) -> ModelRef:
    options = {k: v for k, v in value.items() if k != "provider"}
    return ModelRef(provider=str(value["provider"]), options=FrozenJson(options))


def _structure_mode(value: Mapping[str, Any], _: object) -> OrchestrationSpec:
    cls = MODES[str(value["mode"])]
    result: OrchestrationSpec = _converter.structure({k: v for k, v in value.items() if k != "mode"}, cls)
    return result


_converter.register_structure_hook(ModelRef, _structure_model)
_converter.register_structure_hook(OrchestrationSpec, _structure_mode)
_converter.register_structure_hook(
    EdgeSpec, make_dict_structure_fn(EdgeSpec, _converter, source=override(rename="from"), target=override(rename="to"))
)
_converter.register_structure_hook(
    AutonomousSpec,
    make_dict_structure_fn(
        AutonomousSpec,
        _converter,
        roles=override(
            struct_hook=lambda v, _: FrozenJson({k: _structure_model(m, None) for k, m in (v or {}).items()})
        ),
    ),
)


def structure(document: Mapping[str, Any], cls: type[Any]) -> Any:
    """``document`` (schema-valid) as an instance of ``cls``; raises
    ``cattrs`` / ``InvalidArgumentError`` errors only for documents the schema let
    through but the types refuse (the caller reports them as issues)."""
    return _converter.structure(dict(document), cls)


def structure_links(document: Mapping[str, Any], crew: str | None) -> LinksBlock:
    """The crew's ``links:`` block, read by the ACL grammar exactly as spec §10.2 says
    (absent or bare: undeclared; ``[]``: closes the door; a malformed entry: discarded
    with a warning, the block still declared)."""
    return parse_links(document.get("links"), crew=crew, present="links" in document)


def links_to_document(block: LinksBlock) -> list[dict[str, Any]] | None:
    """The ``links:`` value of ``block`` (``None`` when never declared: the key is
    omitted)."""
    if not block.declared:
        return None
    return [links_to_document_entry(link) for link in block.links]


def links_to_document_entry(link: CrewLink) -> dict[str, Any]:
    """One ``links:`` entry of ``link``."""
    out: dict[str, Any] = {"to": link.to, "direction": link.direction.value}
    if link.allowed_topics:
        out["allowed_topics"] = list(link.allowed_topics)
    return out


def unstructure(value: Any) -> Any:
    """The canonical JSON of a spec value (see the module docstring)."""
    if isinstance(value, ModelRef):
        return {"provider": value.provider, **{k: unstructure(v) for k, v in value.options.items()}}
    if attrs.has(type(value)):
        out: dict[str, Any] = {}
        mode = getattr(type(value), "mode", None)
        if isinstance(mode, str) and type(value) in MODES.values():
            out["mode"] = mode
        renames = _RENAMES.get(type(value), {})
        for field in attrs.fields(type(value)):
            item = getattr(value, field.name)
            default = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory()
            if default is not attrs.NOTHING and item == default:
                continue
            out[renames.get(field.name, field.name)] = _field_value(field, item)
        return out
    return _plain(value)


def _field_value(field: attrs.Attribute[Any], item: Any) -> Any:
    if item is not None and "Seconds" in str(field.type):
        return format_duration(float(item))
    return unstructure(item) if attrs.has(type(item)) else _plain(item)


def _plain(value: Any) -> Any:
    if isinstance(value, FrozenJson):
        return {k: unstructure(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [unstructure(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): unstructure(v) for k, v in value.items()}
    if attrs.has(type(value)):
        return unstructure(value)
    return thaw(value)
