"""Agents parked on waits: parking, a wait's outcome, re-arming after a wake, and a
trigger delivered by the lifecycle.

Plain functions of :class:`~orkeon_actors.crew.crew_actor.CrewActor`'s state, called
only in its turns (on its thread), the actor passed explicitly. A hub wait's outcome
comes back as a :class:`~orkeon_actors.crew.delivery.WaitDone` actor message, so no
thread blocks on a wait and no callback touches the crew's state off its thread.

Guarantees:

* a parked call resolves once: an outcome whose token is not the agent's live wait's
  (withdrawn, or superseded) never answers it; a late message is kept (in the agent's
  inbox, or back in its cursor);
* the answer a model reads is formatted by :mod:`orkeon_actors.tools.waiting`, as from
  ``EventHubTools.invoke``; a ``wait_for_event`` reports what its cursor ``missed``;
* after a wake every parked agent's wait is re-armed with its remaining time; one that
  expired meanwhile gets its timeout message, one whose cursor already holds events
  resolves with the oldest, one whose request is gone resolves with that error; an
  agent restored while it was asking its model asks again from the same conversation
  (a model call is at least once);
* a trigger the lifecycle delivers goes to the first parked agent whose wait it
  matches, and is buffered by every other cursor it matches; nothing matching: dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs
from loguru import logger

from orkeon_actors.crew import agent_step, mail_routing
from orkeon_actors.crew.agent_runtime import AgentRuntime, recording
from orkeon_actors.crew.delivery import WaitDone, WaitTeller
from orkeon_actors.crew.handover import CursorFilter
from orkeon_actors.crew.mode import PARKED
from orkeon_actors.crew.model import ToolCall
from orkeon_actors.crew.state import AgentStatus, OnReply, PendingToolCall, PendingWait
from orkeon_actors.crew.trace_format import describe_message, describe_wait
from orkeon_actors.crew.waits import descriptor_of, kind_of, timed_out_message, wait_matches
from orkeon_actors.errors import UnknownCorrelationError
from orkeon_actors.hub.async_wait import receive_async, wait_async
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import FOREVER, FiniteWaitTimeout, ForeverWaitTimeout, WaitDescriptor, WaitTimeout
from orkeon_actors.tools.cursors import Cursor
from orkeon_actors.tools.waiting import wait_result

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = [
    "cursor_parked",
    "deliver",
    "inject",
    "offer_to_cursors",
    "park",
    "rearm",
    "rearm_all",
    "wait_done",
    "wait_done_now",
]


def park(
    actor: CrewActor,
    runtime: AgentRuntime,
    call: ToolCall,
    descriptor: WaitDescriptor,
    timeout: WaitTimeout,
    cursor: Cursor | None = None,
) -> Any:
    """Park the agent on ``descriptor`` (on ``cursor``'s subscription for a
    ``wait_for_event``: what the cursor receives from now on resolves it)."""
    agent_id = runtime.agent.agent_id
    token = on_done = WaitTeller(actor, WaitDone, agent_id)
    # The outcome may arrive before wait_async returns: it is told to this actor and
    # handled after this call, once runtime.wait_token is set.
    if cursor is not None:
        cursor_parked(actor, runtime, cursor)
        taken = recording(cursor, on_done)
        wait = receive_async(actor.hub, cursor.subscription, timeout, runtime.wait_cancel(), taken)
    else:
        wait = wait_async(actor.hub, runtime.client.caller, descriptor, timeout, runtime.wait_cancel(), on_done)
    runtime.wait = wait
    runtime.wait_token = token
    expires = None if isinstance(timeout, ForeverWaitTimeout) else wait.started_at + timedelta(seconds=timeout.seconds)
    kind = kind_of(descriptor, actor.crew_id)
    runtime.state = attrs.evolve(
        runtime.state,
        status=AgentStatus.WAITING,
        pending=PendingToolCall(call, PendingWait(wait.wait_id, wait.started_at, expires, kind)),
        budget=actor.budget_snapshot(runtime),
    )
    actor.trace(agent_id, "park", f"{call.name} on {describe_wait(descriptor)}")
    actor.orchestrator.on_agent_status(actor, agent_id, AgentStatus.WAITING)
    return PARKED


def cursor_parked(actor: CrewActor, runtime: AgentRuntime, cursor: Cursor) -> None:
    """An agent parks on ``cursor``: one its crew's last snapshot does not hold (and
    that the agent did not opt out of, ``Agent.volatile_cursors``) is told once to
    ``on_cursor`` (the supervisor makes it durable with a checkpoint)."""
    if actor.on_cursor is None:
        return
    topic, match = cursor.key
    key: CursorFilter = (topic, match or None)
    if key in actor.durable_cursors or topic in runtime.agent.volatile_cursors:
        return
    actor.durable_cursors = actor.durable_cursors | {key}  # rare: a crew's first park on a cursor
    actor.on_cursor(actor.crew_id, key)


def wait_done(actor: CrewActor, message: WaitDone) -> None:
    """A hub wait's outcome: answer the agent's parked call with it if it is the live
    wait's, else keep a late message (inbox, or back in the cursors)."""
    runtime = actor.runtimes.get(message.agent_id)
    if runtime is None:
        return
    pending = runtime.state.pending
    outcome = message.outcome
    if pending is None or pending.wait is None or runtime.wait_token != message.wait_id:
        if isinstance(outcome, Message) and not outcome.is_timeout and outcome.target_mailbox == runtime.address:
            runtime.state = attrs.evolve(runtime.state, inbox=(*runtime.state.inbox, outcome))
        elif isinstance(outcome, Message) and not outcome.is_timeout and outcome.target_mailbox is None:
            offer_to_cursors(actor, outcome, [runtime])  # a withdrawn cursor wait's late message: back
        return
    runtime.wait = None
    runtime.wait_token = None
    call = pending.call
    if isinstance(outcome, agent_step.FATAL):
        actor.agent_failed(runtime, outcome)
        return
    missed = 0
    cursor = runtime.cursor_of(pending.wait)
    if cursor is not None:
        if isinstance(outcome, Message) and not outcome.is_timeout:
            cursor.handed_out(outcome)
        missed = cursor.take_missed()
    if isinstance(outcome, Message) and actor.observer is not None:
        actor.trace(runtime.agent.agent_id, "message", describe_message(outcome))
    kind = pending.wait.kind
    correlation = kind.correlation if isinstance(kind, OnReply) else None
    inject(actor, runtime, call, wait_result(call.name, outcome, correlation_id=correlation, missed=missed))


def inject(actor: CrewActor, runtime: AgentRuntime, call: ToolCall, result: Mapping[str, Any]) -> None:
    """Answer ``runtime``'s parked ``call`` with ``result`` and run its agent on."""
    runtime.state = attrs.evolve(runtime.state, status=AgentStatus.RUNNING, pending=None)
    actor.append_tool_result(runtime, call, result)
    actor.orchestrator.on_agent_status(actor, runtime.agent.agent_id, AgentStatus.RUNNING)
    actor.run_agent(runtime)


def rearm_all(actor: CrewActor) -> None:
    """Re-arm the hub wait of every parked agent (and the pumps of idle agents) that
    has none; a wait whose ``expires_at`` passed gets its timeout message now."""
    if actor.crew_pump is None and actor.crew_registration is not None:
        mail_routing.arm_crew_pump(actor)
    for agent_id, runtime in list(actor.runtimes.items()):
        state = runtime.state
        if state.status is AgentStatus.IDLE:
            mail_routing.serve_inbox_or_pump(actor, agent_id)
            continue
        if state.status is AgentStatus.RUNNING and state.pending is None and runtime.call is None:
            runtime.held = False  # checkpointed (or restored): its queued tool calls run now
            if runtime.queued_request is None:  # restored while asking its model: it asks again
                actor.run_agent(runtime)
            continue
        pending = state.pending
        if state.status is not AgentStatus.WAITING or pending is None or pending.wait is None:
            continue
        if runtime.wait is not None:
            continue
        wait = pending.wait
        now = actor.hub.clock.now()
        if wait.expires_at is not None and wait.expires_at <= now:
            wait_done_now(actor, runtime, timed_out_message(actor.crew_id, wait, now))
            continue
        timeout: WaitTimeout = (
            FOREVER if wait.expires_at is None else FiniteWaitTimeout((wait.expires_at - now).total_seconds())
        )
        rearm(actor, runtime, wait, timeout)


def rearm(actor: CrewActor, runtime: AgentRuntime, wait: PendingWait, timeout: WaitTimeout) -> None:
    """Re-arm ``runtime``'s parked ``wait`` for ``timeout`` (resolved now if its cursor
    holds events or its request is gone)."""
    descriptor = descriptor_of(wait.kind)
    token = on_done = WaitTeller(actor, WaitDone, runtime.agent.agent_id)
    cursor = runtime.cursor_of(wait, open_it=True)
    try:
        if cursor is not None:
            ready = cursor.poll()
            if ready is not None:  # the cursor holds events: the wait resolves now
                wait_done_now(actor, runtime, ready)
                return
            new = receive_async(
                actor.hub, cursor.subscription, timeout, runtime.wait_cancel(), recording(cursor, on_done)
            )
        else:
            new = wait_async(actor.hub, runtime.client.caller, descriptor, timeout, runtime.wait_cancel(), on_done)
    except UnknownCorrelationError as exc:  # the request is gone (another process): it timed out
        wait_done_now(actor, runtime, exc)
        return
    runtime.wait = new
    runtime.wait_token = token


def wait_done_now(actor: CrewActor, runtime: AgentRuntime, outcome: Message | BaseException) -> None:
    """Resolve ``runtime``'s parked wait with ``outcome`` in this turn."""
    token = object()
    runtime.wait_token = token
    wait_done(actor, WaitDone(runtime.agent.agent_id, token, outcome))


def deliver(actor: CrewActor, message: Message) -> None:
    """Hand ``message`` to the first parked agent whose wait it matches (withdrawing
    that agent's live wait; a ``wait_for_event`` gets it through its cursor, which
    ignores a message it already handed out or holds). The other agents' cursors it
    matches buffer it too, as their subscriptions would have had the crew been
    awake. A message nothing matches any more is dropped."""
    for runtime in actor.runtimes.values():
        pending = runtime.state.pending
        if runtime.state.status is not AgentStatus.WAITING or pending is None or pending.wait is None:
            continue
        if not wait_matches(pending.wait, actor.crew_id, message):
            continue
        cursor = runtime.cursor_of(pending.wait)
        if cursor is not None and runtime.wait is not None:
            cursor.offer(message)  # the live wait on the cursor takes it (or already has)
        else:
            if runtime.wait is not None and not runtime.wait.cancel():
                continue  # its live wait already took a message: that one wins
            runtime.wait = None
            wait_done_now(actor, runtime, message)
        offer_to_cursors(actor, message, [rt for rt in actor.runtimes.values() if rt is not runtime])
        return
    if not offer_to_cursors(actor, message, list(actor.runtimes.values())):
        logger.debug("crew {}: trigger {} matched no parked agent any more", actor.crew_id, message.id)


def offer_to_cursors(actor: CrewActor, message: Message, runtimes: Sequence[AgentRuntime]) -> bool:
    """Buffer ``message`` (one that reached the crew another way than through these
    cursors) in every cursor of ``runtimes`` it matches; whether one took it."""
    taken = False
    for runtime in runtimes:
        taken = runtime.offer(message) or taken
    return taken
