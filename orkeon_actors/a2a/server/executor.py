"""The SDK's ``AgentExecutor`` of an exposed crew: one request of an A2A task at a time.

``execute`` is called by the SDK's request handler for every message of a task (the
handler serialises them per task):

* **The first message** (the SDK holds no task yet): the caller must be admitted by the
  crew's ``links:`` and the input must match ``a2a.input_schema``, else the task is
  ``rejected`` with the reason; otherwise the crew is spawned and the message posted to
  it (:class:`~orkeon_actors.a2a.server.crew_tasks.CrewTasks`), the task goes
  ``submitted`` then ``working``.
* **A later message**: it answers the crew's pending question (``input-required``) or is
  posted to the crew's ``crew://`` mailbox; the task goes ``working`` again.
* **Then it waits** for the crew's next event, holding no thread: the crew asks its
  caller (the crew is put to sleep, then the task goes ``input-required`` with the
  question, and ``execute`` returns: the caller's next message resumes it), or finishes
  (``completed`` with the crew's answer as the artifact, or ``failed`` with the cause).

``cancel`` marks the task ``canceled``; the task store's save of that state ends the
crew. Blocking hub calls run on worker threads (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Role, Task, TaskState

from orkeon_actors.a2a.server.crew_tasks import (
    CrewTasks,
    Finished,
    InputRequest,
    answer_of,
    question_of,
)
from orkeon_actors.a2a.server.parts import input_problem, payload_of
from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.config.frozen import thaw

__all__ = ["CrewExecutor"]


class CrewExecutor(AgentExecutor):
    """Runs the A2A tasks of ``blueprint`` as crew runs on ``tasks`` (module docstring)."""

    def __init__(self, blueprint: CrewBlueprint, tasks: CrewTasks) -> None:
        self.blueprint = blueprint
        self.tasks = tasks
        exposure = blueprint.a2a
        schema = None if exposure is None or exposure.input_schema is None else thaw(exposure.input_schema)
        self.input_schema = schema

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        caller = context.call_context.user.user_name
        message = context.message
        current = context.current_task
        if current is None:
            await event_queue.enqueue_event(
                Task(id=task_id, context_id=context_id, status={"state": TaskState.TASK_STATE_SUBMITTED})
            )
        try:
            if message is None:
                raise ValueError("the request carries no message")
            payload = payload_of(message)
            if current is None:
                problem = input_problem(payload, self.input_schema)
                if problem is None:
                    problem = await asyncio.to_thread(self.tasks.refusal, self.blueprint, task_id, caller)
                if problem is not None:
                    await updater.reject(_agent_text(task_id, context_id, problem))
                    return
        except ValueError as exc:
            await updater.reject(_agent_text(task_id, context_id, str(exc)))
            return
        future = self.tasks.watch(task_id)
        try:
            if current is None:
                await asyncio.to_thread(self.tasks.start, self.blueprint, task_id, caller, payload)
            else:
                await asyncio.to_thread(self.tasks.answer, current, caller, payload)
            await updater.start_work()
            event = await future
        finally:
            self.tasks.unwatch(task_id, future)
        if isinstance(event, InputRequest):
            await asyncio.to_thread(self.tasks.settle, task_id)
            await updater.requires_input(question_of(task_id, context_id, event.message))
            return
        assert isinstance(event, Finished)
        state, status_message, artifact = answer_of(task_id, context_id, event.outcome)
        if artifact is not None:
            await updater.add_artifact(list(artifact.parts), artifact_id=artifact.artifact_id, name=artifact.name)
        await updater.update_status(state, status_message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel()


def _agent_text(task_id: str, context_id: str, text: str) -> Message:
    return Message(
        message_id=f"{task_id}-rejected",
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )
