"""Graph: nodes run agents, conditional edges on state variables choose the next node,
a cycle counter breaks runaway loops (spec §8.2: current node, state variables, cycle
counter, transition history).

A node's agent answers with a JSON object whose keys are merged into the state variables
(any other answer is stored under the node's name). Edges leaving the node are tried in
order; the first whose condition holds is taken. ``END`` finishes the crew with the
state variables (JSON) as its result.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from orkeon_actors.crew.orchestration import Orchestration, OrchestrationError
from orkeon_actors.crew.orchestration_state import EdgeTransition, GraphState
from orkeon_actors.model.ids import AgentId

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = ["END", "Condition", "Edge", "Graph", "GraphCycleLimitError"]

END: Final = "__end__"

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class GraphCycleLimitError(OrchestrationError):
    """The graph revisited nodes more than ``max_cycles`` times."""


@attrs.frozen
class Condition:
    """``state_vars[var] <op> value`` (data, so a graph is serialisable). A missing
    variable makes the condition false."""

    var: str
    op: str
    value: Any

    def __attrs_post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"unknown operator {self.op!r}; use one of {sorted(_OPS)}")

    def holds(self, state_vars: Mapping[str, Any]) -> bool:
        if self.var not in state_vars:
            return False
        try:
            return _OPS[self.op](state_vars[self.var], self.value)
        except TypeError:
            return False


@attrs.frozen
class Edge:
    source: str
    target: str
    when: Condition | None = None


class Graph(Orchestration):
    """``nodes`` maps node ids to agents; ``edges`` are tried in declaration order;
    ``max_cycles`` bounds revisits of already-visited nodes before the crew fails with
    :class:`GraphCycleLimitError`."""

    mode = "graph"

    def __init__(
        self,
        nodes: Mapping[str, str],
        edges: Sequence[Edge],
        *,
        start: str,
        max_cycles: int = 10,
        state_vars: Mapping[str, Any] | None = None,
    ) -> None:
        self.nodes = {k: AgentId(v) for k, v in nodes.items()}
        for edge in edges:
            for end in (edge.source, edge.target):
                if end != END and end not in self.nodes:
                    raise ValueError(f"edge {edge.source} -> {edge.target} names unknown node {end!r}")
        if start not in self.nodes:
            raise ValueError(f"start node {start!r} is not a node")
        self.edges, self.start_node, self.max_cycles = tuple(edges), start, max_cycles
        self.initial_vars = dict(state_vars or {})

    def agent_ids(self) -> Sequence[AgentId]:
        return list(dict.fromkeys(self.nodes.values()))

    def initial_state(self) -> GraphState:
        return GraphState(self.start_node, dict(self.initial_vars))

    def start(self, crew: CrewActor) -> None:
        self._run_node(crew, crew.orchestration)  # type: ignore[arg-type]

    def _run_node(self, crew: CrewActor, state: GraphState) -> None:
        prompt = json.dumps({"node": state.current_node, "state": state.state_vars}, sort_keys=True)
        crew.assign(self.nodes[state.current_node], f"node:{state.current_node}", prompt)

    def on_task_done(self, crew: CrewActor, agent_id: AgentId, task_id: str, output: str) -> None:
        state: GraphState = crew.orchestration  # type: ignore[assignment]
        try:
            update = json.loads(output)
        except ValueError:
            update = None
        merged = (
            {**state.state_vars, **update}
            if isinstance(update, dict)
            else {**state.state_vars, state.current_node: output}
        )
        edge = next(
            (e for e in self.edges if e.source == state.current_node and (e.when is None or e.when.holds(merged))),
            None,
        )
        if edge is None:
            raise OrchestrationError(
                f"no edge leaves node {state.current_node!r} for state {merged}; add an unconditional edge "
                "or one to END"
            )
        visited = {state.current_node} | {t.source for t in state.history}
        cycles = state.cycle_count + (1 if edge.target in visited else 0)
        history = (*state.history, EdgeTransition(edge.source, edge.target, cycles))
        new = GraphState(edge.target, merged, cycles, history)
        crew.set_orchestration(new, f"{edge.source} -> {edge.target} (cycles={cycles})")
        if edge.target == END:
            crew.complete(json.dumps(merged, sort_keys=True))
            return
        if cycles > self.max_cycles:
            raise GraphCycleLimitError(
                f"graph revisited nodes {cycles} times (max_cycles={self.max_cycles}) at {edge.source} -> "
                f"{edge.target}; the loop does not converge: fix its exit condition or raise max_cycles"
            )
        self._run_node(crew, new)
