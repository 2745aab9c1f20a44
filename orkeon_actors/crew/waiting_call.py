"""What a crew does with an agent's waiting tool call before it parks the agent
(Orkeon EventHub & Crew Lifecycle specification, §5.2, §5.3, §9).

:func:`start` validates the call exactly as the blocking tool does (the rules of
:mod:`orkeon_actors.tools.waiting`), then either answers it at once (:class:`Ready`: a
``wait_for_event`` whose cursor already holds an event, a ``receive_message`` whose
message the crew took for the agent while it was busy) or says what to park on
(:class:`Park`: the hub wait, its timeout, and the cursor a ``wait_for_event`` reads).
A ``send_request`` sends its request here. A refused call raises the typed error the
blocking tool raises; :func:`~orkeon_actors.tools.waiting.refused_result` turns it into
the result the model reads.
"""

from __future__ import annotations

from typing import Any

import attrs

from orkeon_actors.crew.agent_runtime import AgentRuntime
from orkeon_actors.crew.model import ToolCall
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import (
    FiniteWaitTimeout,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
)
from orkeon_actors.tools import ReceiveMessageRequest, SendRequestRequest, WaitForEventRequest, structure_request
from orkeon_actors.tools.cursors import Cursor
from orkeon_actors.tools.waiting import (
    decode_arguments,
    receive_mailbox,
    receive_message_response,
    send_target,
    tool_result,
    wait_for_event_response,
    wait_timeout,
)

__all__ = ["Park", "Ready", "start"]


@attrs.frozen
class Ready:
    """The call is answered without waiting: ``result``; ``event``: the topic event it
    read (a ``wait_for_event``; the crew traces it), else ``None``."""

    result: dict[str, Any]
    event: Message | None = None


@attrs.frozen(eq=False)
class Park:
    """Park the agent on ``descriptor`` for ``timeout`` (through ``cursor``'s
    subscription for a ``wait_for_event``)."""

    descriptor: WaitDescriptor
    timeout: WaitTimeout
    cursor: Cursor | None = None


def start(runtime: AgentRuntime, call: ToolCall) -> Ready | Park:
    """Validate ``call`` (``wait_for_event``, ``receive_message`` or ``send_request``) of
    ``runtime``'s agent and answer it or say where to park. Takes the message it answers
    with from the agent's cursor or inbox. Raises the tool's errors
    (``ToolValidationError``, ``MailboxNotFoundError``, ...)."""
    arguments = decode_arguments(call.arguments)
    if call.name == "wait_for_event":
        wreq = structure_request(arguments, WaitForEventRequest)
        cursor = runtime.tools.topic_cursors.open(wreq.topic, wreq.metadata_match)
        ready = cursor.poll()
        if ready is not None:  # published since the previous call: no need to park
            return Ready(tool_result(wait_for_event_response(ready, cursor.take_missed())), ready)
        return Park(WaitOnTopic(wreq.topic, wreq.metadata_match), wait_timeout(wreq), cursor)
    if call.name == "receive_message":
        rreq = structure_request(arguments, ReceiveMessageRequest)
        mailbox = receive_mailbox(rreq, runtime.address, runtime.crew_id)
        if mailbox == runtime.address and runtime.state.inbox:
            first, *rest = runtime.state.inbox
            runtime.state = attrs.evolve(runtime.state, inbox=tuple(rest))
            return Ready(tool_result(receive_message_response(first)))
        return Park(WaitOnMailbox(mailbox), wait_timeout(rreq))
    sreq = structure_request(arguments, SendRequestRequest)
    target = send_target(sreq)
    seconds = sreq.timeout_ms / 1000
    sent = runtime.client.request(
        target, sreq.payload, seconds, sreq.metadata, cancel=runtime.budget.token, idempotency_key=sreq.idempotency_key
    )
    assert sent.correlation_id is not None  # the hub stamps every request with one
    return Park(WaitOnReply(sent.correlation_id), FiniteWaitTimeout(seconds))
