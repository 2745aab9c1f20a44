"""Parallel: branches run side by side; a join policy (all / any / quorum) decides when
the crew is done and an aggregation combines the branches' outputs (spec §8.2: per-branch
status NotStarted/Running/WaitingForMessage/Done + join state).

Branches share the crew's thread: each runs until it answers or parks on a wait, then the
next one starts, so branches that wait on messages progress concurrently without a
thread each.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from orkeon_actors.crew.orchestration import Orchestration
from orkeon_actors.crew.orchestration_state import BranchState, JoinState, ParallelState
from orkeon_actors.crew.state import AgentStatus
from orkeon_actors.model.ids import AgentId

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = ["AGGREGATIONS", "Branch", "Parallel"]


def _concat(results: dict[str, str]) -> str:
    return "\n".join(results.values())


def _json(results: dict[str, str]) -> str:
    return json.dumps(results, sort_keys=True)


def _majority(results: dict[str, str]) -> str:
    counts = Counter(results.values())
    best = max(counts.values())
    return next(v for v in results.values() if counts[v] == best)


AGGREGATIONS: dict[str, Callable[[dict[str, str]], str]] = {
    "concat": _concat,
    "json": _json,
    "majority": _majority,
}
"""Named aggregations (a name is data; register more here)."""


@attrs.frozen
class Branch:
    branch_id: str
    agent_id: AgentId = attrs.field(converter=AgentId)
    task: str = ""


class Parallel(Orchestration):
    """Run ``branches`` (one agent each, distinct agents) at once.

    ``join``: ``"all"`` waits for every branch, ``"any"`` for the first, ``"quorum"`` for
    ``quorum`` branches; branches still running when the join is met are cancelled. The
    crew's result is ``AGGREGATIONS[aggregation]`` of the finished branches' outputs, in
    branch order."""

    mode = "parallel"

    def __init__(
        self, branches: Sequence[Branch], *, join: str = "all", quorum: int | None = None, aggregation: str = "concat"
    ) -> None:
        if not branches:
            raise ValueError("a Parallel crew needs at least one branch")
        if len({b.agent_id for b in branches}) != len(branches):
            raise ValueError("each Parallel branch needs its own agent")
        if join not in ("all", "any", "quorum"):
            raise ValueError(f"join must be 'all', 'any' or 'quorum', got {join!r}")
        if join == "quorum" and (quorum is None or not 1 <= quorum <= len(branches)):
            raise ValueError(f"join='quorum' needs 1 <= quorum <= {len(branches)}, got {quorum!r}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; known: {sorted(AGGREGATIONS)}")
        self.branches = tuple(branches)
        self.join, self.quorum, self.aggregation = join, quorum, aggregation

    def agent_ids(self) -> Sequence[AgentId]:
        return [b.agent_id for b in self.branches]

    def initial_state(self) -> ParallelState:
        return ParallelState(
            {b.branch_id: BranchState(b.agent_id, b.task) for b in self.branches},
            JoinState(self.join, self.quorum, self.aggregation),
        )

    def _needed(self) -> int:
        return {"all": len(self.branches), "any": 1}.get(self.join, self.quorum or 1)

    def _branch_of(self, agent_id: AgentId) -> str:
        return next(b.branch_id for b in self.branches if b.agent_id == agent_id)

    def _set_branch(self, crew: CrewActor, branch_id: str, status: str, output: str | None = None) -> ParallelState:
        state: ParallelState = crew.orchestration  # type: ignore[assignment]
        branch = attrs.evolve(state.branches[branch_id], status=status, output=output)
        new = attrs.evolve(state, branches={**state.branches, branch_id: branch})
        crew.set_orchestration(new, f"branch {branch_id} {status}")
        return new

    def start(self, crew: CrewActor) -> None:
        for branch in self.branches:
            if crew.status.value in ("completed", "failed"):
                return
            self._set_branch(crew, branch.branch_id, "Running")
            crew.assign(branch.agent_id, branch.branch_id, branch.task)

    def on_agent_status(self, crew: CrewActor, agent_id: AgentId, status: AgentStatus) -> None:
        branch_id = self._branch_of(agent_id)
        state: ParallelState = crew.orchestration  # type: ignore[assignment]
        if state.branches[branch_id].status == "Done":
            return
        self._set_branch(crew, branch_id, "WaitingForMessage" if status is AgentStatus.WAITING else "Running")

    def on_task_done(self, crew: CrewActor, agent_id: AgentId, task_id: str, output: str) -> None:
        state = self._set_branch(crew, task_id, "Done", output)
        assert state.join is not None
        partial = {**state.join.partial_results, task_id: output}
        join = attrs.evolve(state.join, partial_results=partial)
        if len(partial) < self._needed():
            crew.set_orchestration(attrs.evolve(state, join=join), f"join {len(partial)}/{self._needed()}")
            return
        ordered = {b.branch_id: partial[b.branch_id] for b in self.branches if b.branch_id in partial}
        result = AGGREGATIONS[self.aggregation](ordered)
        crew.set_orchestration(attrs.evolve(state, join=attrs.evolve(join, result=result)), "join met")
        for branch in self.branches:
            if branch.branch_id not in partial:
                crew.cancel_agent(branch.agent_id)
        crew.complete(result)
