"""What a remote A2A agent's stream of events means to the calling agent.

:class:`TaskProgress` folds the ``StreamResponse`` s of one call (A2A v1.0, "Streaming
and Asynchronous Operations": a ``Task``, then ``TaskStatusUpdateEvent`` s and
``TaskArtifactUpdateEvent`` s; or one ``Message``) into the JSON the model reads:

* ``events``: each status update and artifact chunk, in order, as
  ``{"kind": "status", "state": ..., "text": ...}`` or
  ``{"kind": "artifact", "name": ..., "text": ...}``;
* :meth:`TaskProgress.outcome`: the result of a call that ended ``completed`` (the
  answer: the artifacts' text, else the status message's) or ``input-required`` (the
  question, with the ``task_id`` to answer it with), or
  :class:`~orkeon_actors.errors.RemoteAgentFailedError` for a task that ``failed``, was
  ``rejected``, ``canceled`` or needs authentication (``auth-required``): its message
  says what the agent said and what the calling agent can do.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, Final

from a2a.types import Artifact, Message, Part, StreamResponse, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict

from orkeon_actors.errors import RemoteAgentFailedError

__all__ = ["INTERRUPTED", "TERMINAL", "TaskProgress", "parts_text", "state_name"]

_NAMES: Final = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
TERMINAL: Final = frozenset({"completed", "failed", "canceled", "rejected"})
"""States a task never leaves."""
INTERRUPTED: Final = frozenset({"input-required", "auth-required"})
"""States where the task waits on its caller."""

_WHAT_TO_DO: Final = {
    "failed": "the agent could not do it: change the request, ask another agent, or report the failure",
    "rejected": "the agent refused the request: rephrase it within the skills its card lists, or ask another agent",
    "canceled": "the task was canceled before it finished: ask again if the answer is still needed",
    "auth-required": "the agent needs credentials this runtime does not send: report it to the operator",
}


def state_name(state: int) -> str:
    """The A2A name of a task state (``input-required``), ``unknown`` for none."""
    name: str = _NAMES.get(TaskState.ValueType(state), "unknown")
    return name


def parts_text(parts: Sequence[Part]) -> str:
    """The text of message or artifact parts: text as is, data as JSON, a file by its
    URL or name, joined by newlines."""
    out: list[str] = []
    for part in parts:
        if part.HasField("text"):
            out.append(part.text)
        elif part.HasField("data"):
            out.append(json.dumps(MessageToDict(part.data), sort_keys=True))
        elif part.HasField("url"):
            out.append(part.url)
        elif part.HasField("raw"):
            out.append(f"[{len(part.raw)} bytes {part.media_type or 'of data'} {part.filename}]".replace("  ", " "))
    return "\n".join(out)


class TaskProgress:
    """The state of one call, folded from its events (see the module docstring).
    ``task_id`` is the task the call continues, if any; :attr:`identified` is set once
    the remote task's id is known. Made and used on one event loop."""

    def __init__(self, agent: str, task_id: str | None = None) -> None:
        self.agent = agent
        self.identified = asyncio.Event()
        self._task_id: str | None = None
        self.task_id = task_id
        self.context_id: str | None = None
        self.state = "submitted"
        self.status_text = ""
        self.reply: str | None = None  # a Message answer (no task)
        self.events: list[dict[str, Any]] = []
        self._artifacts: dict[str, tuple[str, str]] = {}  # id -> (name, text), in arrival order

    @property
    def task_id(self) -> str | None:
        """The remote task's id, once known."""
        return self._task_id

    @task_id.setter
    def task_id(self, value: str | None) -> None:
        self._task_id = value
        if value:
            self.identified.set()

    @property
    def settled(self) -> bool:
        """Whether the call has its outcome: a message, or a terminal or interrupted task."""
        return self.reply is not None or self.state in TERMINAL or self.state in INTERRUPTED

    def add(self, response: StreamResponse) -> dict[str, Any] | None:
        """Fold one event in; the event as the model reads it (``None`` for the task
        snapshot that opens a stream)."""
        kind = response.WhichOneof("payload")
        if kind == "task":
            self._task(response.task)
            return None
        if kind == "message":
            self._message(response.message)
            return {"kind": "message", "text": self.reply}
        if kind == "status_update":
            update = response.status_update
            self.task_id, self.context_id = update.task_id or self.task_id, update.context_id or self.context_id
            self._status(update.status)
            event = {"kind": "status", "state": self.state, "text": self.status_text}
        elif kind == "artifact_update":
            update = response.artifact_update
            self.task_id, self.context_id = update.task_id or self.task_id, update.context_id or self.context_id
            text = self._artifact(update.artifact, append=update.append)
            event = {"kind": "artifact", "name": update.artifact.name, "text": text}
        else:
            return None
        self.events.append(event)
        return event

    def add_task(self, task: Task) -> None:
        """Fold in a task read with ``tasks/get`` (polling)."""
        self._task(task)

    def _task(self, task: Task) -> None:
        self.task_id, self.context_id = task.id or self.task_id, task.context_id or self.context_id
        self._status(task.status)
        for artifact in task.artifacts:
            self._artifacts.pop(artifact.artifact_id, None)
            self._artifact(artifact, append=False)

    def _message(self, message: Message) -> None:
        self.context_id = message.context_id or self.context_id
        self.task_id = message.task_id or self.task_id
        self.reply = parts_text(message.parts)

    def _status(self, status: TaskStatus) -> None:
        self.state = state_name(status.state)
        self.status_text = parts_text(status.message.parts) if status.HasField("message") else ""

    def _artifact(self, artifact: Artifact, *, append: bool) -> str:
        text = parts_text(artifact.parts)
        name, before = self._artifacts.get(artifact.artifact_id, (artifact.name, ""))
        self._artifacts[artifact.artifact_id] = (name or artifact.name, before + text if append else text)
        return text

    def _head(self) -> dict[str, Any]:
        head: dict[str, Any] = {"agent": self.agent, "state": self.state}
        if self.task_id:
            head["task_id"] = self.task_id
        if self.context_id:
            head["context_id"] = self.context_id
        return head

    def outcome(self) -> dict[str, Any]:
        """The result the model reads; raises ``RemoteAgentFailedError`` for a task that
        ended without an answer (see the module docstring)."""
        if self.reply is not None:
            return {**self._head(), "state": "completed", "answer": self.reply}
        if self.state == "completed":
            artifacts = [{"name": name, "text": text} for name, text in self._artifacts.values()]
            answer = "\n".join(a["text"] for a in artifacts if a["text"]) or self.status_text
            result = {**self._head(), "answer": answer, "artifacts": artifacts}
            return {**result, "events": self.events} if self.events else result
        if self.state == "input-required":
            return {
                **self._head(),
                "question": self.status_text,
                "events": self.events,
                "next": (
                    f"the agent {self.agent!r} needs more input: answer its question with "
                    f"ask_agent(agent={self.agent!r}, task_id={self.task_id!r}, message=YOUR_ANSWER)"
                ),
            }
        said = f": {self.status_text}" if self.status_text else ""
        raise RemoteAgentFailedError(
            f"the A2A agent {self.agent!r} ended task {self.task_id} as {self.state}{said}; "
            f"{_WHAT_TO_DO.get(self.state, 'ask again or report the failure')}",
            agent=self.agent,
            task_id=self.task_id,
            state=self.state,
        )
