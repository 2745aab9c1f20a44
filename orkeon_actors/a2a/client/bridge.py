"""The hub-side bridge: posting to ``a2a://NAME`` calls the external A2A agent ``NAME``.

For each configured agent the bridge registers the mailbox ``a2a://NAME`` on the hub and
consumes it with a non-blocking wait (:func:`~orkeon_actors.hub.async_wait.wait_async`):
no thread waits on it. Each message is one call, run on the runtime's I/O loop
(:meth:`~orkeon_actors.a2a.client.remote.RemoteAgents.ask`), calls running concurrently.

What a message means (its JSON payload): a string is the text to send; an object
``{"message": TEXT, "task_id": ID}`` continues the remote task ``ID`` that asked for
input (the answer to its question); any other JSON is sent as its JSON text.

What comes back, sent as from ``a2a://NAME`` (the ACL peer ``a2a:NAME``: the hub's ACL
stage checks it as inbound traffic, so the sender's crew needs an ``inbound`` or
``bidirectional`` link naming it):

* a **post** (``post_message``) is answered by posts to the sender's mailbox (its agent's,
  else its crew's): one per streamed event as it arrives (metadata ``a2a_event``:
  ``status`` or ``artifact``), then the outcome (metadata ``a2a_state``: ``completed``,
  ``input-required`` or ``error``, and ``a2a_task_id``): the JSON ``ask_agent`` returns,
  or its ``{"error": ...}``. An ``input-required`` outcome is answered by posting
  ``{"message": ..., "task_id": ...}`` to ``a2a://NAME``.
* a **request** (``send_request``) is answered by the reply: the outcome alone (a refusal
  of the inbound check is the reply's error, so the requester does not wait for nothing).

Every message posted to ``a2a://NAME`` already passed the hub's ACL stage (outbound: the
sender's crew needs a link naming ``a2a:NAME``). An answer the ACL refuses is dropped:
logged, and kept in :attr:`A2ABridge.refusals` (the last 100).
"""

from __future__ import annotations

import asyncio
import collections
import json
from typing import Any

from loguru import logger

from orkeon_actors.a2a.client.gate import A2AGate
from orkeon_actors.a2a.client.remote import RemoteAgents
from orkeon_actors.errors import EventAclError, EventHubError, HubStoppedError, MailboxNotFoundError
from orkeon_actors.hub.async_wait import AsyncWait, WaitOutcome, wait_async
from orkeon_actors.hub.port import SEND_TOPIC, CallerContext, EventHub, MailboxRegistration
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import FOREVER, WaitOnMailbox
from orkeon_actors.tools.waiting import error_result

__all__ = ["A2ABridge", "request_of"]

_SYSTEM = CallerContext(CrewId.SYSTEM)


def request_of(message: Message) -> tuple[str, str | None]:
    """The text and the ``task_id`` a message to ``a2a://NAME`` asks for (see the
    module docstring)."""
    try:
        body = json.loads(message.payload) if message.payload else ""
    except ValueError:
        return message.payload.decode("utf-8", "replace"), None
    if isinstance(body, str):
        return body, None
    if isinstance(body, dict) and isinstance(body.get("message"), str) and set(body) <= {"message", "task_id"}:
        task_id = body.get("task_id")
        return body["message"], task_id if isinstance(task_id, str) and task_id else None
    return json.dumps(body), None


def _sender(message: Message) -> MailboxAddress:
    if message.source_agent_id is not None:
        return MailboxAddress.agent(message.source_crew_id, message.source_agent_id)
    return MailboxAddress.crew(message.source_crew_id)


class A2ABridge:
    """The ``a2a://NAME`` mailboxes of ``agents`` on ``hub`` (see the module docstring).
    :meth:`close` unregisters them."""

    def __init__(self, hub: EventHub, agents: RemoteAgents, gate: A2AGate) -> None:
        self.hub = hub
        self.agents = agents
        self.gate = gate
        self.refusals: collections.deque[EventAclError] = collections.deque(maxlen=100)
        self._closed = False
        self._waits: dict[str, AsyncWait] = {}
        self._calls: set[asyncio.Task[None]] = set()
        self._registrations: list[MailboxRegistration] = hub.register_mailboxes(
            [MailboxAddress.a2a(name) for name in agents.names]
        )
        for name in agents.names:
            self._arm(name)

    def _arm(self, name: str) -> None:
        if self._closed:
            return
        try:
            self._waits[name] = wait_async(
                self.hub,
                _SYSTEM,
                WaitOnMailbox(MailboxAddress.a2a(name)),
                FOREVER,
                None,
                lambda outcome: self._arrived(name, outcome),
            )
        except (HubStoppedError, MailboxNotFoundError):
            self._closed = True

    def _arrived(self, name: str, outcome: WaitOutcome) -> None:
        """On whichever thread settled the wait: hand the message to the I/O loop, which
        also re-arms the wait (never re-armed here: no recursion on buffered mail)."""
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, HubStoppedError | MailboxNotFoundError):
                logger.warning("the A2A bridge of a2a://{} stopped reading: {}", name, outcome)
            return
        loop = self.agents.loop
        try:
            loop.loop().call_soon_threadsafe(self._start, name, outcome)
        except HubStoppedError:
            self._closed = True

    def _start(self, name: str, message: Message) -> None:
        self._arm(name)
        task = asyncio.get_running_loop().create_task(self._call(name, message))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _call(self, name: str, message: Message) -> None:
        text, task_id = request_of(message)
        sender = _sender(message)
        peer = self.hub.bind(self.gate.peer_ids[name])
        request = message.topic == SEND_TOPIC and message.correlation_id is not None
        base = {"a2a_agent": name}

        async def on_event(event: dict[str, Any]) -> None:
            await self._deliver(name, lambda: peer.post(sender, event, {**base, "a2a_event": event["kind"]}))

        result: dict[str, Any]
        try:
            result = await self.agents.ask(name, text, task_id=task_id, on_event=None if request else on_event)
            state = str(result.get("state", "completed"))
        except EventHubError as exc:
            result, state = error_result(exc, getattr(exc, "field", None)), "error"
        metadata = {**base, "a2a_state": state}
        if isinstance(result.get("task_id"), str):
            metadata["a2a_task_id"] = result["task_id"]
        if request:
            assert message.correlation_id is not None
            correlation = message.correlation_id
            try:
                self.gate.inbound(name, sender)
            except EventAclError as exc:
                self._refused(name, exc)
                result, metadata = error_result(exc, None), {**base, "a2a_state": "error"}
            await self._deliver(name, lambda: peer.reply(correlation, result, metadata))
        else:
            await self._deliver(name, lambda: peer.post(sender, result, metadata))

    async def _deliver(self, name: str, send: Any) -> None:
        """Run ``send`` (a hub call: it may wait for a store commit) off the loop's thread."""
        try:
            await self.agents.loop.run_blocking(send)
        except EventAclError as exc:
            self._refused(name, exc)
        except EventHubError as exc:
            logger.warning("the answer of a2a://{} could not be delivered: {}", name, exc)

    def _refused(self, name: str, exc: EventAclError) -> None:
        logger.warning("an answer of a2a://{} was refused by the ACL and dropped: {}", name, exc)
        self.refusals.append(exc)

    def close(self) -> None:
        """Stop reading and unregister the mailboxes; idempotent. Calls in flight end
        with the runtime's I/O loop."""
        if self._closed and not self._registrations:
            return
        self._closed = True
        for wait in self._waits.values():
            wait.cancel()
        for registration in self._registrations:
            registration.close()
        self._registrations = []
