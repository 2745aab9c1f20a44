"""The hub side of the A2A server: each A2A task is one crew run (docs/a2a.md).

* **A task starts a crew.** The first message of a task spawns a crew of the exposed
  blueprint under the lifecycle supervisor, with the crew id ``a2a-{task id}`` (so the
  one names the other, across restarts, with no mapping to keep), and posts the message
  to its ``crew://`` mailbox as the caller's ``client://NAME`` peer (to ``a2a.agent``
  when the block names one).
* **Every caller is a ``client://`` peer.** Each caller the server knows is registered
  with the ACL as ``client:NAME`` and owns a durable ``client://NAME`` mailbox. Before a
  crew is spawned for it, the crew's ``links:`` must grant ``client:NAME`` an ``inbound``
  (or ``bidirectional``) link: the decision of
  :class:`~orkeon_actors.acl.RestrictiveCrewLinkPolicy`, whatever the hub's own policy
  (a crew without ``links:`` takes no A2A caller).
* **A crew that asks its caller** (``send_request`` or ``post_message`` to
  ``client://NAME``) puts its task in ``input-required``: one reader thread per caller
  takes what reaches ``client://NAME``; the message's source crew names the task. The
  crew is put to sleep (snapshot in the store) before the task says ``input-required``,
  so a restart loses neither. The caller's next message on the task answers it: a post
  to the asking agent's mailbox (durable: it wakes the sleeping crew, also after a
  restart), or a ``reply`` to the request's correlation id for a ``send_request``
  (the hub keeps pending requests in memory: after a restart of the serving process
  that reply is refused, ``UnknownCorrelationError``, and the crew's request ends at
  its timeout; ask with ``post_message`` + ``receive_message`` to survive restarts).
  Where to answer is kept in the task's status message (``metadata.orkeon_reply``),
  in the task store: durable.
* **Events reach the executor serving the task, else the store.** The executor of a
  request registers for its task before it acts (:meth:`CrewTasks.watch`); a crew event
  (a question, the outcome) goes to it; an event with no executor waiting (the crew
  finished after a restart, while no request was open) is written to the task store
  directly, so ``tasks/get`` tells it.
* **Cancel stops the crew**: every save of a ``canceled`` task ends its crew
  (``CrewSupervisor.end``: its calls in flight are withdrawn).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import attrs
from a2a.types import Artifact, Message, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from loguru import logger

from orkeon_actors.a2a.server.parts import parts_of
from orkeon_actors.a2a.server.task_store import SqliteTaskStore
from orkeon_actors.acl import AclRegistry, RestrictiveCrewLinkPolicy
from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.crew import query_crew
from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import CancelledError, HubStoppedError
from orkeon_actors.hub.client import HubClient
from orkeon_actors.hub.port import POST_TOPIC
from orkeon_actors.lifecycle.supervisor import CrewSupervisor
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.ids import CrewId, MessageId
from orkeon_actors.model.message import Message as HubMessage
from orkeon_actors.model.options import FOREVER, WaitOnMailbox

__all__ = [
    "REPLY_KEY",
    "TERMINAL",
    "CrewEvent",
    "CrewTasks",
    "Finished",
    "InputRequest",
    "answer_of",
    "apply_event",
    "crew_of",
    "question_of",
    "reply_target",
    "task_of",
]

REPLY_KEY = "orkeon_reply"
"""The status-message metadata entry telling where the caller's answer goes."""
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
_PREFIX = "a2a-"
_SLEEP_WITHIN = 5.0
"""Seconds a crew that asked its caller has to become sleepable (every agent parked)."""


def crew_of(task_id: str) -> CrewId:
    """The crew running task ``task_id``."""
    return CrewId(_PREFIX + task_id)


def task_of(crew_id: CrewId) -> str | None:
    """The task crew ``crew_id`` runs, or ``None`` for a crew that is not a task's."""
    return crew_id[len(_PREFIX) :] if crew_id.startswith(_PREFIX) else None


@attrs.frozen
class InputRequest:
    """The crew asked its caller: ``message`` reached ``client://NAME``."""

    message: HubMessage


@attrs.frozen
class Finished:
    """The crew finished (completed or failed)."""

    outcome: CrewOutcome


CrewEvent = InputRequest | Finished


@attrs.define(eq=False)
class _Caller:
    name: str
    client: HubClient
    token: CancelToken
    thread: threading.Thread | None = None


class CrewTasks:
    """Crews as A2A tasks on one supervisor (see the module docstring)."""

    def __init__(self, supervisor: CrewSupervisor, acl: AclRegistry) -> None:
        self.supervisor = supervisor
        self.hub = supervisor.hub
        self.acl = acl
        self.admission = RestrictiveCrewLinkPolicy(acl)
        self.stores: dict[str, SqliteTaskStore] = {}
        """The task store of each exposed crew, by crew name."""
        self.blueprints: dict[str, CrewBlueprint] = {}
        self._callers: dict[str, _Caller] = {}
        self._waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[CrewEvent]]] = {}
        self._lock = threading.Lock()
        self._closed = False

    # -- setup -----------------------------------------------------------------------------

    def add_caller(self, name: str) -> None:
        """Register ``client://name`` (ACL name ``client:name``) and read its mailbox."""
        if name in self._callers:
            return
        client_id = self.acl.register_client(name)
        client = self.hub.bind(client_id)
        address = MailboxAddress.client(name)
        self.hub.register_mailbox(address, owner=client_id)
        caller = _Caller(name, client, CancelToken())
        caller.thread = threading.Thread(
            target=self._read, args=(caller, address), name=f"orkeon-a2a-{name}", daemon=True
        )
        self._callers[name] = caller
        caller.thread.start()

    def add_crew(self, blueprint: CrewBlueprint, store: SqliteTaskStore) -> None:
        """Serve ``blueprint``'s tasks from ``store``; watch the unfinished ones of a
        previous run, so their outcomes reach the store."""
        self.blueprints[blueprint.name] = blueprint
        self.stores[blueprint.name] = store
        store.on_saved(self._saved)
        rows = store.hub.readers.query(
            "SELECT task_id FROM a2a_tasks WHERE crew = ? AND state NOT IN (?, ?, ?, ?)",
            (blueprint.name, *(int(s) for s in TERMINAL)),
        )
        for (task_id,) in rows:
            self._watch_outcome(str(task_id))

    def close(self) -> None:
        """Stop the mailbox readers (what they did not take stays in the store)."""
        self._closed = True
        for caller in self._callers.values():
            caller.token.cancel()
        for caller in self._callers.values():
            if caller.thread is not None:
                caller.thread.join(timeout=5)

    # -- what executors call (worker threads) ---------------------------------------------

    def refusal(self, blueprint: CrewBlueprint, task_id: str, caller: str) -> str | None:
        """Why ``caller`` may not start a run of ``blueprint``, or ``None`` (registers
        the task's crew id with the ACL under the crew's name either way)."""
        if caller not in self._callers:
            return f"caller {caller!r} is not a client of this server"
        crew_id = self.acl.register_crew(blueprint.name, crew_of(task_id), blueprint.links)
        probe = HubMessage(
            id=MessageId.new(),
            topic=POST_TOPIC,
            source_crew_id=self._callers[caller].client.crew_id,
            published_at=self.hub.clock.now(),
            target_crew_id=crew_id,
            target_mailbox=MailboxAddress.crew(crew_id),
        )
        decision = self.admission.decide(probe, "post")
        if decision.allowed:
            return None
        self.acl.unregister_crew(crew_id)
        return str(decision.error())

    def start(self, blueprint: CrewBlueprint, task_id: str, caller: str, payload: object) -> None:
        """Spawn the task's crew and post the caller's first message to it."""
        crew_id = self.supervisor.spawn(blueprint.name, crew_of(task_id))
        self._watch_outcome(task_id)
        ref = self.supervisor.ref(crew_id)
        if ref is not None:  # its first turn registers its mailboxes: answered after it
            query_crew(ref, "status")
        exposure = blueprint.a2a
        metadata = {"a2a_task": task_id, "a2a_caller": str(MailboxAddress.client(caller))}
        if exposure is not None and exposure.agent is not None:
            metadata["agent"] = exposure.agent
        self._callers[caller].client.post(MailboxAddress.crew(crew_id), payload, metadata=metadata)

    def answer(self, task: Task, caller: str, payload: object) -> None:
        """Deliver the caller's next message on ``task``: the answer to the crew's
        question when it asked one, else a post to the crew's ``crew://`` mailbox."""
        client = self._callers[caller].client
        where = reply_target(task)
        if where is None:
            client.post(MailboxAddress.crew(crew_of(task.id)), payload, metadata={"a2a_task": task.id})
        elif where.get("correlation_id"):
            client.reply(str(where["correlation_id"]), payload)
        else:
            client.post(MailboxAddress.parse(str(where["mailbox"])), payload, metadata={"a2a_task": task.id})

    def settle(self, task_id: str) -> bool:
        """Put the task's crew to sleep once every agent waits (its state then is in
        the store); ``False`` when it did not become sleepable within a few seconds
        (it stays live; its idle timeout puts it to sleep later)."""
        crew = crew_of(task_id)
        deadline = time.monotonic() + _SLEEP_WITHIN
        pause = threading.Event()
        while time.monotonic() < deadline:
            status = self.supervisor.status(crew)
            if status is None or status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
                return status is None
            if status is CrewStatus.WAITING and self.supervisor.sleep(crew):
                return True
            pause.wait(0.005)
        logger.bind(component="orkeon_actors.a2a").warning("crew {} asked its caller but did not fall asleep", crew)
        return False

    def watch(self, task_id: str) -> asyncio.Future[CrewEvent]:
        """A future on the calling loop resolved by the task's next crew event."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[CrewEvent] = loop.create_future()
        with self._lock:
            self._waiting[task_id] = (loop, future)
        return future

    def unwatch(self, task_id: str, future: asyncio.Future[CrewEvent]) -> None:
        with self._lock:
            current = self._waiting.get(task_id)
            if current is not None and current[1] is future:
                del self._waiting[task_id]

    # -- crew events (hub and writer threads) ---------------------------------------------

    def _watch_outcome(self, task_id: str) -> None:
        self.supervisor.when_finished(crew_of(task_id), lambda outcome: self._finished(task_id, outcome))

    def _finished(self, task_id: str, outcome: CrewOutcome) -> None:
        self.acl.unregister_crew(crew_of(task_id))  # a finished run's id leaves the ACL registry
        self._deliver(task_id, Finished(outcome))

    def _read(self, caller: _Caller, address: MailboxAddress) -> None:
        while not self._closed:
            try:
                message = caller.client.wait_for(WaitOnMailbox(address), FOREVER, cancel=caller.token)
            except (CancelledError, HubStoppedError):
                return
            task_id = task_of(message.source_crew_id)
            if task_id is None:
                logger.bind(component="orkeon_actors.a2a").warning(
                    "{} got a message from crew {}, which runs no A2A task: dropped", address, message.source_crew_id
                )
                continue
            self._deliver(task_id, InputRequest(message))

    def _deliver(self, task_id: str, event: CrewEvent) -> None:
        with self._lock:
            waiting = self._waiting.pop(task_id, None)
        if waiting is not None:
            loop, future = waiting
            if not loop.is_closed():
                loop.call_soon_threadsafe(self._resolve, future, event, task_id)
                return
        self._record(task_id, event)

    def _resolve(self, future: asyncio.Future[CrewEvent], event: CrewEvent, task_id: str) -> None:
        if future.done():  # the executor went away (cancelled): the store hears of it
            self._record(task_id, event)
            return
        future.set_result(event)

    def _record(self, task_id: str, event: CrewEvent) -> None:
        """Write ``event`` to the task store (no executor serves the task now). On a
        worker thread: never on the writer's (an outcome callback runs there)."""
        threading.Thread(target=self._write, args=(task_id, event), name="orkeon-a2a-record", daemon=True).start()

    def _write(self, task_id: str, event: CrewEvent) -> None:
        for store in self.stores.values():
            found = store.load(task_id)
            if found is None:
                continue
            task, owner = found
            if task.status.state in TERMINAL:
                return
            if isinstance(event, InputRequest):
                self.settle(task_id)
            apply_event(task, event)
            try:
                store.put(task, owner)
            except HubStoppedError:
                return
            return
        logger.bind(component="orkeon_actors.a2a").warning("crew event for unknown A2A task {}: dropped", task_id)

    def _saved(self, task: Task) -> None:
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            try:
                self.supervisor.end(crew_of(task.id), "A2ATaskCanceled", f"the A2A caller cancelled task {task.id}")
            except HubStoppedError:
                return


def reply_target(task: Task) -> Mapping[str, Any] | None:
    """Where the caller's answer to ``task``'s pending question goes, or ``None``."""
    if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return None
    metadata = MessageToDict(task.status.message.metadata)
    found = metadata.get(REPLY_KEY)
    return found if isinstance(found, dict) else None


def question_of(task_id: str, context_id: str, message: HubMessage) -> Message:
    """The agent message asking the caller what the crew's ``message`` asks, with
    where the answer goes (:data:`REPLY_KEY`)."""
    where: dict[str, Any] = {"mailbox": f"agent://{message.source_crew_id}/{message.source_agent_id}"}
    if message.correlation_id is not None:
        where["correlation_id"] = str(message.correlation_id)
    metadata = Struct()
    metadata.update({REPLY_KEY: where})
    return Message(
        message_id=str(message.id),
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_AGENT,
        parts=parts_of(message.payload),
        metadata=metadata,
    )


def answer_of(task_id: str, context_id: str, outcome: CrewOutcome) -> tuple[TaskState, Message, Artifact | None]:
    """The final state of a task whose crew finished with ``outcome``, its status
    message and (completed) its artifact: the crew's answer."""
    if outcome.status is CrewStatus.COMPLETED:
        text = outcome.result or ""
        artifact = Artifact(artifact_id=f"{task_id}-answer", name="answer", parts=parts_of(_as_json(text)))
        message = Message(message_id=f"{task_id}-done", task_id=task_id, context_id=context_id, role=Role.ROLE_AGENT)
        message.parts.extend(parts_of(_as_json(text)))
        return TaskState.TASK_STATE_COMPLETED, message, artifact
    failure = str(outcome.failure) if outcome.failure is not None else "the crew failed"
    message = Message(message_id=f"{task_id}-failed", task_id=task_id, context_id=context_id, role=Role.ROLE_AGENT)
    message.parts.extend(parts_of(_as_json(failure)))
    return TaskState.TASK_STATE_FAILED, message, None


def apply_event(task: Task, event: CrewEvent) -> None:
    """Bring ``task`` (a stored copy) to what ``event`` says."""
    if isinstance(event, InputRequest):
        question = question_of(task.id, task.context_id, event.message)
        task.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED, message=question))
        task.history.append(question)
        return
    state, message, artifact = answer_of(task.id, task.context_id, event.outcome)
    task.status.CopyFrom(TaskStatus(state=state, message=message))
    if artifact is not None:
        task.artifacts.append(artifact)
    task.status.timestamp.GetCurrentTime()


def _as_json(text: str) -> bytes:
    return json.dumps(text).encode()
