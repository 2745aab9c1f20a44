"""Sequential: tasks in order; each agent sees the inputs and outputs of the tasks
before it (spec §8.2: current task + results already executed)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from orkeon_actors.crew.orchestration import Orchestration
from orkeon_actors.crew.orchestration_state import SequentialState, TaskResult
from orkeon_actors.model.ids import AgentId

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = ["Sequential", "Task"]


@attrs.frozen
class Task:
    description: str
    agent_id: AgentId = attrs.field(converter=AgentId)


class Sequential(Orchestration):
    """Run ``tasks`` one after the other. Task *i*'s prompt is a JSON object with the
    ``task`` and the ``previous`` results (input and output of each). The crew's result
    is the last task's output."""

    mode = "sequential"

    def __init__(self, tasks: Sequence[Task]) -> None:
        if not tasks:
            raise ValueError("a Sequential crew needs at least one task")
        self.tasks = tuple(tasks)

    def agent_ids(self) -> Sequence[AgentId]:
        return [t.agent_id for t in self.tasks]

    def initial_state(self) -> SequentialState:
        return SequentialState()

    def start(self, crew: CrewActor) -> None:
        self._assign(crew, crew.orchestration)  # type: ignore[arg-type]

    def _assign(self, crew: CrewActor, state: SequentialState) -> None:
        task = self.tasks[state.current_task_index]
        prompt = json.dumps(
            {
                "task": task.description,
                "previous": [{"agent": r.agent_id, "input": r.input, "output": r.output} for r in state.completed],
            },
            sort_keys=True,
        )
        crew.assign(task.agent_id, f"task-{state.current_task_index}", prompt)

    def on_task_done(self, crew: CrewActor, agent_id: AgentId, task_id: str, output: str) -> None:
        state: SequentialState = crew.orchestration  # type: ignore[assignment]
        index = state.current_task_index
        done = TaskResult(index, agent_id, self.tasks[index].description, output)
        state = SequentialState(index + 1, (*state.completed, done))
        crew.set_orchestration(state, f"task {index} done by {agent_id}")
        if state.current_task_index >= len(self.tasks):
            crew.complete(output)
        else:
            self._assign(crew, state)
