"""Hierarchical: a manager plans, delegates sub-tasks to workers over the hub, and
aggregates their partial results (spec §8.2: manager state with plan and truncated
history; per worker the in-progress sub-task and partial results).

Delegation is real hub traffic: each sub-task is posted to the worker's mailbox
(``agent://{crew}/{worker}``, metadata ``orkeon.subtask``), the crew hands it to the
worker when it is idle, and the worker's answer is posted to the manager's mailbox
(metadata ``orkeon.partial_result``).

The manager's planning answer is ``{"subtasks": [{"worker": ..., "task": ...}, ...]}``;
its aggregation answer is the crew's result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from orkeon_actors.crew.orchestration import Orchestration, OrchestrationError
from orkeon_actors.crew.orchestration_state import DelegationState, HierarchicalState, ManagerState, SubTask, TaskResult
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = ["Hierarchical"]

SUBTASK_KEY = "orkeon.subtask"
RESULT_KEY = "orkeon.partial_result"
HISTORY_LIMIT = 8


class Hierarchical(Orchestration):
    mode = "hierarchical"

    def __init__(self, manager: str, workers: Sequence[str], goal: str) -> None:
        self.manager = AgentId(manager)
        self.workers = tuple(AgentId(w) for w in workers)
        if not self.workers or self.manager in self.workers:
            raise ValueError("a Hierarchical crew needs workers distinct from its manager")
        self.goal = goal

    def agent_ids(self) -> Sequence[AgentId]:
        return [self.manager, *self.workers]

    def initial_state(self) -> HierarchicalState:
        return HierarchicalState(ManagerState(goal=self.goal), {w: DelegationState() for w in self.workers})

    def _state(self, crew: CrewActor) -> HierarchicalState:
        return crew.orchestration  # type: ignore[return-value]

    def _history(self, manager: ManagerState, entry: str) -> tuple[str, ...]:
        return (*manager.history, entry[:200])[-HISTORY_LIMIT:]

    def start(self, crew: CrewActor) -> None:
        crew.assign(self.manager, "plan", json.dumps({"goal": self.goal, "workers": list(self.workers)}))

    def on_task_done(self, crew: CrewActor, agent_id: AgentId, task_id: str, output: str) -> None:
        state = self._state(crew)
        if task_id == "plan":
            plan = self._parse_plan(output)
            manager = attrs.evolve(
                state.manager, phase="delegating", plan=plan, history=self._history(state.manager, output)
            )
            crew.set_orchestration(attrs.evolve(state, manager=manager), f"plan with {len(plan)} sub-tasks")
            for sub in plan:
                crew.client.post(
                    MailboxAddress.agent(crew.crew_id, sub.worker),
                    {"task": sub.task},
                    {SUBTASK_KEY: sub.subtask_id},
                )
        elif task_id == "aggregate":
            manager = attrs.evolve(state.manager, phase="done", history=self._history(state.manager, output))
            crew.set_orchestration(attrs.evolve(state, manager=manager), "aggregated")
            crew.complete(output)
        elif task_id.startswith("subtask:"):
            delegation = state.workers[agent_id]
            finished = delegation.in_progress
            assert finished is not None
            crew.set_orchestration(
                attrs.evolve(
                    state, workers={**state.workers, agent_id: DelegationState(None, delegation.partial_results)}
                ),
                f"{agent_id} finished {finished.subtask_id}",
            )
            crew.client.post(
                MailboxAddress.agent(crew.crew_id, self.manager),
                {"subtask_id": finished.subtask_id, "worker": str(agent_id), "task": finished.task, "output": output},
                {RESULT_KEY: finished.subtask_id},
            )

    def _parse_plan(self, output: str) -> tuple[SubTask, ...]:
        try:
            data = json.loads(output)
            items = data["subtasks"]
            plan = tuple(SubTask(f"st-{i}", AgentId(item["worker"]), str(item["task"])) for i, item in enumerate(items))
        except (ValueError, KeyError, TypeError) as exc:
            raise OrchestrationError(
                'the manager\'s plan must be {"subtasks": [{"worker": ..., "task": ...}]}, got '
                f"{output[:120]!r} ({exc})"
            ) from None
        unknown = [s.worker for s in plan if s.worker not in self.workers]
        if not plan or unknown:
            raise OrchestrationError(
                f"the plan must delegate to the crew's workers {list(self.workers)}; got {unknown or 'none'}"
            )
        return plan

    def on_agent_mail(self, crew: CrewActor, agent_id: AgentId, message: Message) -> bool:
        state = self._state(crew)
        if agent_id in self.workers and SUBTASK_KEY in message.metadata:
            sub = next(s for s in state.manager.plan if s.subtask_id == message.metadata[SUBTASK_KEY])
            delegation = state.workers[agent_id]
            crew.set_orchestration(
                attrs.evolve(state, workers={**state.workers, agent_id: attrs.evolve(delegation, in_progress=sub)}),
                f"{agent_id} takes {sub.subtask_id}",
            )
            crew.assign(agent_id, f"subtask:{sub.subtask_id}", json.dumps({"task": sub.task}))
            return True
        if agent_id == self.manager and RESULT_KEY in message.metadata:
            data = message.json()
            worker = AgentId(data["worker"])
            delegation = state.workers[worker]
            result = TaskResult(len(delegation.partial_results), worker, data["task"], data["output"])
            workers = {
                **state.workers,
                worker: attrs.evolve(delegation, partial_results=(*delegation.partial_results, result)),
            }
            state = attrs.evolve(state, workers=workers)
            crew.set_orchestration(state, f"partial result {data['subtask_id']} from {worker}")
            received = sum(len(d.partial_results) for d in workers.values())
            if received == len(state.manager.plan):
                manager = attrs.evolve(state.manager, phase="aggregating")
                crew.set_orchestration(attrs.evolve(state, manager=manager), "aggregating")
                results = [
                    {"worker": r.agent_id, "task": r.input, "output": r.output}
                    for w in self.workers
                    for r in workers[w].partial_results
                ]
                crew.assign(self.manager, "aggregate", json.dumps({"goal": self.goal, "results": results}))
            return True
        return False
