"""``CrewBlueprint``: a whole crew as an immutable value, whichever paradigm wrote it.

YAML (:func:`~orkeon_actors.config.load_crew`), the fluent
:class:`~orkeon_actors.config.CrewBuilder` and TypeScript (``defineCrew``, emitted as
JSON) all produce the same canonical document, validated by the one schema
(:mod:`orkeon_actors.config.schema`) and read into this value by the one codec
(:mod:`orkeon_actors.config.codec`). Two blueprints are equal when they describe the
same crew; :meth:`CrewBlueprint.to_yaml` writes one back, and
``CrewBlueprint.from_yaml(bp.to_yaml()) == bp``.

A blueprint is data: its models are references and its tools names. Running it
(:mod:`orkeon_actors.config.launch`) resolves them.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from cattrs.errors import BaseValidationError
from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.representer import SafeRepresenter

from orkeon_actors.acl.grammar import LinksBlock
from orkeon_actors.config import codec
from orkeon_actors.config.frozen import thaw
from orkeon_actors.config.issues import ConfigIssue, Path, raise_if_any
from orkeon_actors.config.model_registry import provider_problems
from orkeon_actors.config.source import SourceMap
from orkeon_actors.config.spec import (
    A2aSpec,
    AgentSpec,
    AutonomousSpec,
    BudgetSpec,
    ConsensualSpec,
    EventSpec,
    GraphSpec,
    HierarchicalSpec,
    ModelRef,
    OrchestrationSpec,
    ParallelSpec,
    Seconds,
)
from orkeon_actors.config.validate import schema_issues
from orkeon_actors.errors import InvalidArgumentError

__all__ = ["CrewBlueprint", "document_issues"]

_END = "__end__"  # orkeon_actors.orchestration.END, kept literal: the schema documents it
_LINE_BREAKS_OF_YAML_1_1 = re.compile("[\x85\u2028\u2029]")


class _Representer(SafeRepresenter):
    """The safe representer, except that a string holding U+0085, U+2028 or U+2029 is
    written double-quoted, where they are escaped (``\\N``, ``\\L``, ``\\P``):
    ruamel.yaml writes them raw in plain or single-quoted scalars, where its reader (and
    any YAML 1.1 reader) takes them for line breaks, folded to a space."""

    def represent_str(self, data: str) -> ScalarNode:
        if _LINE_BREAKS_OF_YAML_1_1.search(data):
            node: ScalarNode = self.represent_scalar("tag:yaml.org,2002:str", data, style='"')
            return node
        plain: ScalarNode = super().represent_str(data)
        return plain


_Representer.add_representer(str, _Representer.represent_str)


def _agents(value: Any) -> tuple[AgentSpec, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class CrewBlueprint:
    """A crew as data (see the module docstring). Build one with
    :class:`~orkeon_actors.config.CrewBuilder`, :func:`~orkeon_actors.config.load_crew`
    or :meth:`from_document`, which validate; a blueprint constructed field by field is
    checked only by :meth:`validate`."""

    name: str
    description: str = ""
    idle_timeout: Seconds | None = None
    budget: BudgetSpec | None = None
    agents: tuple[AgentSpec, ...] = attrs.field(converter=_agents)
    orchestration: OrchestrationSpec
    links: LinksBlock = attrs.field(factory=LinksBlock.undeclared)
    event: EventSpec = attrs.field(factory=EventSpec)
    a2a: A2aSpec | None = None
    """How the crew is served as an A2A agent (docs/a2a.md); ``None``: not exposed."""

    # -- documents -----------------------------------------------------------------------

    @classmethod
    def from_document(
        cls,
        document: Any,
        *,
        source: SourceMap | None = None,
        what: str = "the crew document",
        lenient_links: bool = False,
    ) -> CrewBlueprint:
        """Validate ``document`` (plain JSON values) and read it. Raises
        :class:`~orkeon_actors.errors.CrewConfigError` listing *every* problem, each
        with its JSON pointer and, with ``source``, its file:line:column.

        ``lenient_links``: a malformed ``links:`` entry is not an error but is
        discarded with a warning, the block staying declared (spec §10.2: a malformed
        entry closes the door, it never opens it); by default it is an error."""
        issues = document_issues(document, source, lenient_links=lenient_links)
        raise_if_any(issues, what)
        return _read(document)

    @classmethod
    def from_yaml(cls, text: str, *, file: str = "<crew yaml>", lenient_links: bool = False) -> CrewBlueprint:
        """:meth:`from_document` of YAML text (positions name ``file``)."""
        from orkeon_actors.config.source import read_yaml

        document, source, issues = read_yaml(text, file)
        raise_if_any(issues, file)
        return cls.from_document(document, source=source, what=file, lenient_links=lenient_links)

    def validate(self) -> CrewBlueprint:
        """``self`` if its document is valid, else
        :class:`~orkeon_actors.errors.CrewConfigError` with every problem."""
        raise_if_any(document_issues(self.to_document()), f"crew {self.name!r}")
        return self

    def to_document(self) -> dict[str, Any]:
        """The canonical document: schema-valid JSON values, defaults omitted."""
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        if self.idle_timeout is not None:
            out["idle_timeout"] = codec.format_duration(float(self.idle_timeout))
        if self.budget is not None:
            out["budget"] = codec.unstructure(self.budget)
        out["agents"] = [codec.unstructure(a) for a in self.agents]
        out["orchestration"] = codec.unstructure(self.orchestration)
        links = codec.links_to_document(self.links)
        if links is not None:
            out["links"] = links
        event = codec.unstructure(self.event)
        if event:
            out["event"] = event
        if self.a2a is not None:
            out["a2a"] = codec.unstructure(self.a2a)
        result: dict[str, Any] = thaw(out)
        return result

    def to_json(self, *, indent: int | None = 2) -> str:
        """The canonical document as JSON text."""
        return json.dumps(self.to_document(), indent=indent)

    def to_yaml(self) -> str:
        """The canonical document as YAML (block style); reading it back gives an
        equal blueprint, whatever its strings hold."""
        yaml = YAML(typ="safe", pure=True)
        yaml.Representer = _Representer
        yaml.default_flow_style = False
        yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
        buffer = io.StringIO()
        yaml.dump(self.to_document(), buffer)
        return buffer.getvalue()

    # -- what running it needs -----------------------------------------------------------

    def agent(self, agent_id: str) -> AgentSpec:
        """The agent ``agent_id`` (``KeyError`` if there is none)."""
        for spec in self.agents:
            if spec.id == agent_id:
                return spec
        raise KeyError(agent_id)

    def model_refs(self) -> Iterator[tuple[Path, ModelRef]]:
        """Every model reference with its path: the agents', and an autonomous crew's
        per-role ones."""
        for index, spec in enumerate(self.agents):
            yield ("agents", index, "model"), spec.model
        if isinstance(self.orchestration, AutonomousSpec):
            for role, ref in self.orchestration.roles.items():
                yield ("orchestration", "roles", role), ref


def _read(document: Mapping[str, Any]) -> CrewBlueprint:
    body = {k: v for k, v in document.items() if k not in ("links", "orchestration")}
    orchestration = codec.structure({"o": document["orchestration"]}, _OrchestrationHolder).o
    partial: _Partial = codec.structure(body, _Partial)
    return CrewBlueprint(
        name=partial.name,
        description=partial.description,
        idle_timeout=partial.idle_timeout,
        budget=partial.budget,
        agents=partial.agents,
        orchestration=orchestration,
        links=codec.structure_links(document, partial.name),
        event=partial.event,
        a2a=partial.a2a,
    )


@attrs.frozen(kw_only=True)
class _Partial:
    name: str
    description: str = ""
    idle_timeout: Seconds | None = None
    budget: BudgetSpec | None = None
    agents: tuple[AgentSpec, ...]
    event: EventSpec = attrs.field(factory=EventSpec)
    a2a: A2aSpec | None = None


@attrs.frozen
class _OrchestrationHolder:
    o: OrchestrationSpec


def document_issues(
    document: Any, source: SourceMap | None = None, *, lenient_links: bool = False
) -> list[ConfigIssue]:
    """Every problem of ``document``: the schema's, then (for a schema-valid document)
    the references between its parts: unique agent ids, agents the orchestration names,
    graph edges, ``deliver_to`` mailboxes, model providers."""
    issues = schema_issues(document, source)
    if lenient_links:
        issues = [i for i in issues if not (len(i.path) > 1 and i.path[0] == "links")]
    if issues:
        return issues
    try:
        blueprint = _read(document)
    except (BaseValidationError, InvalidArgumentError) as exc:
        return [ConfigIssue((), f"cannot be read: {exc}", None if source is None else source.find(()))]
    found = [
        ConfigIssue(path, message, None if source is None else source.find(path))
        for path, message in _reference_problems(blueprint)
    ]
    if not lenient_links:
        for warning in blueprint.links.warnings:
            path: Path = ("links",) if warning.index is None else ("links", warning.index)
            if document.get("links") is None:
                continue  # a bare links: is never declared (spec §10.2), not an error
            found.append(ConfigIssue(path, warning.message, None if source is None else source.find(path)))
    return found


def _reference_problems(bp: CrewBlueprint) -> Iterator[tuple[Path, str]]:
    ids = [a.id for a in bp.agents]
    for index, agent_id in enumerate(ids):
        if agent_id in ids[:index]:
            yield ("agents", index, "id"), f"agent id {agent_id!r} is used twice; agent ids are unique within a crew"
    known = set(ids)
    o = bp.orchestration
    for path, name in _named_agents(o):
        if name not in known:
            problem = f"names agent {name!r}, which the crew does not declare (agents: {', '.join(ids)})"
            yield ("orchestration", *path), problem
    if bp.a2a is not None and bp.a2a.agent is not None and bp.a2a.agent not in known:
        problem = f"names agent {bp.a2a.agent!r}, which the crew does not declare (agents: {', '.join(ids)})"
        yield ("a2a", "agent"), problem
    if isinstance(o, HierarchicalSpec) and o.manager in o.workers:
        yield ("orchestration", "workers"), f"the manager {o.manager!r} cannot also be a worker"
    if isinstance(o, ParallelSpec):
        if o.join == "quorum" and (o.quorum is None or o.quorum > len(o.branches)):
            yield ("orchestration", "quorum"), f"join: quorum needs 1 <= quorum <= {len(o.branches)}, got {o.quorum}"
        agents = [b.agent for b in o.branches]
        if len(set(agents)) != len(agents):
            yield ("orchestration", "branches"), "each branch needs its own agent"
    if isinstance(o, GraphSpec):
        if o.start not in o.nodes:
            yield ("orchestration", "start"), f"start node {o.start!r} is not a node ({', '.join(o.nodes)})"
        for index, edge in enumerate(o.edges):
            if edge.source not in o.nodes:
                yield ("orchestration", "edges", index, "from"), f"names unknown node {edge.source!r}"
            if edge.target not in o.nodes and edge.target != _END:
                problem = f"names unknown node {edge.target!r} (or {_END} to finish)"
                yield ("orchestration", "edges", index, "to"), problem
    for index, sub in enumerate(bp.event.subscribe):
        wrong = _deliver_to_problem(bp, sub.deliver_to)
        if wrong is not None:
            yield ("event", "subscribe", index, "deliver_to"), wrong
    for path, ref in bp.model_refs():
        for problem in provider_problems(ref.provider, ref.options):
            yield path, problem


def _named_agents(o: OrchestrationSpec) -> Iterator[tuple[Path, str]]:
    if isinstance(o, HierarchicalSpec):
        yield ("manager",), o.manager
        for i, w in enumerate(o.workers):
            yield ("workers", i), w
    elif isinstance(o, ConsensualSpec):
        for i, v in enumerate(o.voters):
            yield ("voters", i), v
        if o.proposer is not None:
            yield ("proposer",), o.proposer
    elif isinstance(o, GraphSpec):
        for node, agent in o.nodes.items():
            yield ("nodes", node), str(agent)
    elif isinstance(o, AutonomousSpec):
        yield ("root",), o.root
    elif isinstance(o, ParallelSpec):
        for i, b in enumerate(o.branches):
            yield ("branches", i, "agent"), b.agent
    else:
        for i, t in enumerate(o.tasks):
            yield ("tasks", i, "agent"), t.agent


def _deliver_to_problem(bp: CrewBlueprint, deliver_to: str) -> str | None:
    scheme, _, rest = deliver_to.partition("://")
    crew, _, agent = rest.partition("/")
    if crew != bp.name:
        return f"delivers to crew {crew!r}; a subscription delivers to a mailbox of this crew ({bp.name!r})"
    if scheme == "agent" and agent not in {a.id for a in bp.agents}:
        return f"delivers to agent {agent!r}, which the crew does not declare"
    return None
