"""``CrewBuilder``: the fluent Python way to write a crew (spec §13.2), producing the
same :class:`CrewBlueprint` as the YAML::

    bp = (
        ok.CrewBuilder()
        .name("newsroom")
        .agent("writer", model=ok.scripted(["draft"]), role="writer")
        .agent("editor", model=ok.scripted(["edited"]))
        .sequential([("write a draft", "writer"), ("edit it", "editor")])
        .idle_timeout("5m")
        .links([{"to": "fraud-crew", "direction": "outbound"}])
        .on_event("reviews.requested", "agent://newsroom/writer")
        .publishes("drafts.ready")
        .build()
    )

Each method records part of the canonical document; :meth:`CrewBuilder.build`
validates the whole document against the schema (every problem at once, with its JSON
pointer, as :class:`~orkeon_actors.errors.CrewConfigError`) and returns the blueprint.
Unlike the seed's builder, links and the idle timeout are declarable here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from orkeon_actors.acl.links import CrewLink
from orkeon_actors.config import codec
from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.config.spec import BudgetSpec, ModelRef
from orkeon_actors.crew.model import ModelResponse

__all__ = ["CrewBuilder", "scripted"]

Step = str | Mapping[str, Any] | ModelResponse


def _step(step: Step) -> Any:
    if not isinstance(step, ModelResponse):
        return dict(step) if isinstance(step, Mapping) else step
    usage = {"tokens": step.usage.total_tokens, "cost": step.usage.cost}
    extra = {k: v for k, v in usage.items() if v != {"tokens": 10, "cost": 0.0}[k]}
    if step.tool_calls:
        if len(step.tool_calls) != 1:
            raise ValueError("a scripted step written in a crew document makes one tool call")
        tool = step.tool_calls[0]
        return {"call": tool.name, "arguments": tool.parsed_arguments(), **extra}
    return {"text": step.text, **extra} if extra else step.text


def scripted(script: Sequence[Step], *, per_task: bool = False) -> dict[str, Any]:
    """A ``{provider: scripted}`` model reference; steps are strings (answers), mappings
    (``{text}`` / ``{call, arguments}``) or the ``respond`` / ``call`` responses of
    :mod:`orkeon_actors.crew.model`."""
    ref: dict[str, Any] = {"provider": "scripted", "script": [_step(s) for s in script]}
    if per_task:
        ref["per_task"] = True
    return ref


def _model(model: Mapping[str, Any] | ModelRef) -> Any:
    return codec.unstructure(model) if isinstance(model, ModelRef) else dict(model)


def _duration(value: str | float | timedelta) -> str | float:
    return value.total_seconds() if isinstance(value, timedelta) else value


def _budget(value: Mapping[str, Any] | BudgetSpec) -> Any:
    budget = codec.unstructure(value) if isinstance(value, BudgetSpec) else dict(value)
    if "max_wall_time" in budget:
        budget["max_wall_time"] = _duration(budget["max_wall_time"])
    return budget


def _link(link: CrewLink | Mapping[str, Any]) -> Any:
    if isinstance(link, CrewLink):
        return codec.links_to_document_entry(link)
    return dict(link)


class CrewBuilder:
    """Fluent builder of a :class:`CrewBlueprint` (see the module docstring). Methods
    return the builder; a method called twice replaces what it set (``agent`` and
    ``on_event`` / ``publishes`` add)."""

    def __init__(self) -> None:
        self._doc: dict[str, Any] = {}
        self._agents: list[dict[str, Any]] = []

    def name(self, name: str) -> CrewBuilder:
        self._doc["name"] = name
        return self

    def description(self, text: str) -> CrewBuilder:
        self._doc["description"] = text
        return self

    def idle_timeout(self, value: str | float | timedelta) -> CrewBuilder:
        """``"5m"``, ``"PT30S"``, seconds, or a ``timedelta``."""
        self._doc["idle_timeout"] = _duration(value)
        return self

    def budget(self, value: Mapping[str, Any] | BudgetSpec | None = None, **limits: Any) -> CrewBuilder:
        """The crew budget (each agent's default): ``budget(max_tokens=1000)``."""
        self._doc["budget"] = _budget({**(_budget(value) if value is not None else {}), **limits})
        return self

    def agent(
        self,
        agent_id: str,
        *,
        model: Mapping[str, Any] | ModelRef,
        role: str | None = None,
        instructions: str | None = None,
        tools: Iterable[str] | None = None,
        hub_tools: bool | None = None,
        budget: Mapping[str, Any] | BudgetSpec | None = None,
        max_turns: int | None = None,
        max_cursors: int | None = None,
        max_buffered: int | None = None,
        volatile_cursors: Iterable[str] | None = None,
    ) -> CrewBuilder:
        """Add an agent; ``model`` is a reference (:func:`scripted`, or
        ``{"provider": "openai", "model": ...}``). ``volatile_cursors``: topic patterns
        of its cursors that opt out of durability (YAML ``cursors.volatile``)."""
        entry: dict[str, Any] = {"id": agent_id, "model": _model(model)}
        for key, value in (("role", role), ("instructions", instructions), ("hub_tools", hub_tools)):
            if value is not None:
                entry[key] = value
        if tools is not None:
            entry["tools"] = list(tools)
        if budget is not None:
            entry["budget"] = _budget(budget)
        if max_turns is not None:
            entry["max_turns"] = max_turns
        cursors: dict[str, Any] = {
            k: v for k, v in (("max_cursors", max_cursors), ("max_buffered", max_buffered)) if v is not None
        }
        if volatile_cursors is not None:
            cursors["volatile"] = list(volatile_cursors)
        if cursors:
            entry["cursors"] = cursors
        self._agents.append(entry)
        return self

    # -- the six modes -------------------------------------------------------------------

    def _mode(self, mode: str, **config: Any) -> CrewBuilder:
        self._doc["orchestration"] = {"mode": mode, **{k: v for k, v in config.items() if v is not None}}
        return self

    def sequential(self, tasks: Sequence[tuple[str, str] | Mapping[str, Any]]) -> CrewBuilder:
        """Tasks as ``(description, agent)`` pairs or ``{description, agent}``."""
        items = [dict(t) if isinstance(t, Mapping) else {"description": t[0], "agent": t[1]} for t in tasks]
        return self._mode("sequential", tasks=items)

    def hierarchical(self, manager: str, workers: Sequence[str], goal: str) -> CrewBuilder:
        return self._mode("hierarchical", manager=manager, workers=list(workers), goal=goal)

    def parallel(
        self,
        branches: Sequence[tuple[str, str, str] | Mapping[str, Any]],
        *,
        join: str | None = None,
        quorum: int | None = None,
        aggregation: str | None = None,
    ) -> CrewBuilder:
        """Branches as ``(id, agent, task)`` triples or ``{id, agent, task}``."""
        items = [dict(b) if isinstance(b, Mapping) else {"id": b[0], "agent": b[1], "task": b[2]} for b in branches]
        return self._mode("parallel", branches=items, join=join, quorum=quorum, aggregation=aggregation)

    def consensual(
        self,
        voters: Sequence[str],
        proposal: str,
        *,
        rule: str | None = None,
        max_rounds: int | None = None,
        proposer: str | None = None,
    ) -> CrewBuilder:
        return self._mode(
            "consensual", voters=list(voters), proposal=proposal, rule=rule, max_rounds=max_rounds, proposer=proposer
        )

    def graph(
        self,
        nodes: Mapping[str, str],
        edges: Sequence[tuple[str, str] | tuple[str, str, Mapping[str, Any]] | Mapping[str, Any]],
        *,
        start: str,
        max_cycles: int | None = None,
    ) -> CrewBuilder:
        """Edges as ``(from, to)``, ``(from, to, {var, op, value})`` or mappings."""
        items: list[dict[str, Any]] = []
        for edge in edges:
            if isinstance(edge, Mapping):
                items.append(dict(edge))
            else:
                item: dict[str, Any] = {"from": edge[0], "to": edge[1]}
                if len(edge) == 3:
                    item["when"] = dict(edge[2])
                items.append(item)
        return self._mode("graph", nodes=dict(nodes), edges=items, start=start, max_cycles=max_cycles)

    def autonomous(
        self,
        root: str,
        task: str,
        *,
        roles: Mapping[str, Mapping[str, Any] | ModelRef] | None = None,
        max_depth: int | None = None,
        max_agents: int | None = None,
        sub_agent_budget: Mapping[str, Any] | BudgetSpec | None = None,
    ) -> CrewBuilder:
        """``roles``: the model reference of the sub-agents created for each role."""
        return self._mode(
            "autonomous",
            root=root,
            task=task,
            max_depth=max_depth,
            max_agents=max_agents,
            sub_agent_budget=None if sub_agent_budget is None else _budget(sub_agent_budget),
            roles=None if roles is None else {k: _model(v) for k, v in roles.items()},
        )

    # -- links and events ----------------------------------------------------------------

    def links(self, links: Iterable[CrewLink | Mapping[str, Any]] | None) -> CrewBuilder:
        """The ``links:`` block (spec §10.2): ``[]`` closes the door; ``None`` removes a
        declaration (never declared)."""
        if links is None:
            self._doc.pop("links", None)
        else:
            self._doc["links"] = [_link(link) for link in links]
        return self

    def on_event(self, topic: str, deliver_to: str) -> CrewBuilder:
        """Subscribe: messages on ``topic`` reach ``deliver_to``
        (``agent://{crew name}/{agent}``), also while the crew sleeps."""
        self._event().setdefault("subscribe", []).append({"topic": topic, "deliver_to": deliver_to})
        return self

    def publishes(self, topic: str, *, target_crew_id: str | None = None) -> CrewBuilder:
        """Declare a topic the crew publishes (see ``event.publish``)."""
        entry = {"topic": topic} if target_crew_id is None else {"topic": topic, "target_crew_id": target_crew_id}
        self._event().setdefault("publish", []).append(entry)
        return self

    def undeclared_publish(self, policy: str) -> CrewBuilder:
        """``"warn"`` or ``"refuse"``: what publishing an undeclared topic does."""
        self._event()["undeclared_publish"] = policy
        return self

    def _event(self) -> dict[str, Any]:
        event: dict[str, Any] = self._doc.setdefault("event", {})
        return event

    # -- result --------------------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        """The document built so far (not validated)."""
        doc = dict(self._doc)
        if self._agents:
            doc["agents"] = list(self._agents)
        order = ["name", "description", "idle_timeout", "budget", "agents", "orchestration", "links", "event"]
        return {k: doc[k] for k in sorted(doc, key=lambda k: order.index(k) if k in order else len(order))}

    def build(self) -> CrewBlueprint:
        """Validate and return the blueprint; raises
        :class:`~orkeon_actors.errors.CrewConfigError` with every problem."""
        return CrewBlueprint.from_document(self.document(), what="the CrewBuilder crew")
