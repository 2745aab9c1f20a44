"""``AgentRuntime``: the live side of one agent of a crew — its definition, its state,
its budget and its hub handles (client, tools and ``wait_for_event`` cursors, mailbox
registration, the hub waits it is parked on) — and what the crew does with one agent's
cursors and waits (Orkeon EventHub & Crew Lifecycle specification, §5.2, §8.1).

Touched only on the crew actor's thread (the waits' callbacks tell the actor; they never
run code on this object).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import attrs

from orkeon_actors.crew.agent import Agent, BudgetLimits
from orkeon_actors.crew.call_events import Started
from orkeon_actors.crew.model import ModelRequest
from orkeon_actors.crew.state import AgentState, AgentStatus, OnTopic, PendingWait, TopicCursorState
from orkeon_actors.hub.async_wait import AsyncWait
from orkeon_actors.hub.client import HubClient
from orkeon_actors.hub.port import EventHub, MailboxRegistration
from orkeon_actors.hub.routing import cursor_matches
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.cancel import Budget, CancelToken
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.tools import EventHubTools
from orkeon_actors.tools.cursors import Cursor

__all__ = ["AgentRuntime", "CallInFlight", "make_budget", "recording"]


def make_budget(limits: BudgetLimits, clock: Clock) -> Budget:
    """The live budget of an agent with ``limits`` (wall time on ``clock``)."""
    return Budget(
        max_wall_time=limits.max_wall_time,
        max_tokens=limits.max_tokens,
        max_tool_calls=limits.max_tool_calls,
        max_cost=limits.max_cost,
        clock=clock,
    )


def recording(cursor: Cursor, on_done: Callable[[Message | BaseException], None]) -> Callable[[Any], None]:
    """``on_done`` of a wait on ``cursor``: the message it took is recorded as handed out
    there and then (on the taker's thread), so the same message offered again before the
    crew handled the outcome (a wake's trigger) is not buffered a second time."""

    def done(outcome: Message | BaseException) -> None:
        if isinstance(outcome, Message) and not outcome.is_timeout:
            cursor.handed_out(outcome)
        on_done(outcome)

    return done


@attrs.define(eq=False)
class CallInFlight:
    """An agent's model call (or async tool call) running on the I/O loop: its task's
    ``future``, the ``token`` its outcome carries (an outcome without the live call's
    token is a withdrawn call's, ignored), the ``request`` asked (``None`` for a tool
    call), and what to undo when it ends (a budget callback, a deadline timer)."""

    future: concurrent.futures.Future[None]
    token: object
    request: ModelRequest | None = None
    cleanups: list[Callable[[], None]] = attrs.field(factory=list)

    def end(self) -> None:
        """Undo the cleanups and cancel the task (a no-op once it finished)."""
        cleanups, self.cleanups = self.cleanups, []
        for cleanup in cleanups:
            cleanup()
        self.future.cancel()


class AgentRuntime:
    """One agent of a crew, live. ``wait``/``wait_token``: the hub wait its parked tool
    call is on (the token tells a current outcome from a withdrawn wait's late one);
    ``pump``/``pump_token``: the watch on its mailbox while it is idle."""

    __slots__ = (
        "_tools",
        "address",
        "agent",
        "budget",
        "call",
        "client",
        "crew_id",
        "held",
        "pump",
        "pump_token",
        "queued_request",
        "registration",
        "state",
        "tool_call",
        "wait",
        "wait_token",
    )

    def __init__(self, agent: Agent, hub: EventHub, crew_id: CrewId) -> None:
        self.agent = agent
        self.crew_id = crew_id
        self.state = AgentState(agent.agent_id, agent.role, budget=agent.budget.snapshot())
        self.budget = make_budget(agent.budget, hub.clock)
        self.client: HubClient = hub.bind(crew_id, agent.agent_id)
        self.address = MailboxAddress.agent(crew_id, agent.agent_id)
        self._tools: EventHubTools | None = None
        self.registration: MailboxRegistration | None = None
        self.wait: AsyncWait | None = None
        self.wait_token: object = None
        self.pump: AsyncWait | None = None
        self.pump_token: object = None
        self.call: CallInFlight | None = None
        """The model call in flight on the I/O loop."""
        self.queued_request: ModelRequest | None = None
        """The model call waiting for a slot of its crew's ``max_concurrent_calls``."""
        self.tool_call: Started | None = None
        """The tool call started and not answered yet (its finished event repeats it)."""
        self.held = False
        """Running, its model's tool calls queued until a checkpoint of its crew holds
        them (:func:`~orkeon_actors.crew.replay_keys.hold`): the crew counts as waiting."""

    @property
    def busy(self) -> bool:
        """Running and not held for a checkpoint: its crew is working, not waiting."""
        return self.state.status is AgentStatus.RUNNING and not self.held

    def withdraw_call(self) -> bool:
        """Withdraw the model call in flight (its task is cancelled: an SDK aborts its
        HTTP request); whether there was one."""
        call, self.call = self.call, None
        self.queued_request = None
        if call is None:
            return False
        call.end()
        return True

    def wait_cancel(self) -> CancelToken | None:
        """The token a parked wait of this agent settles on: its budget's, when that can
        fire while the agent is parked (a wall-time deadline) or already fired (the
        wait refuses at once). Otherwise ``None``: a budget without a deadline fires only
        from ``consume``, on the crew's thread while the agent runs, never while it is
        parked, and registering on it would cost every parked wait a callback
        (≈ 0.4 KB)."""
        token = self.budget.token
        return token if token.deadline is not None or token.cancelled else None

    @property
    def tools(self) -> EventHubTools:
        """The agent's hub tools and ``wait_for_event`` cursors, made at first use (an
        agent parked on ``receive_message`` never needs them: ≈ 1.2 KB less per crew)."""
        tools = self._tools
        if tools is None:
            tools = self._tools = EventHubTools(
                self.client,
                cancel=self.budget.token,
                register_own_mailbox=False,
                max_cursors=self.agent.max_cursors,
                max_buffered=self.agent.max_buffered,
            )
        return tools

    def open_cursors(self) -> list[Cursor]:
        """The open ``wait_for_event`` cursors, least recently used first (none, and
        nothing made, while the agent never used its tools)."""
        return [] if self._tools is None else self._tools.topic_cursors.cursors()

    # -- cursors --------------------------------------------------------------------------

    def cursor_of(self, wait: PendingWait, *, open_it: bool = False) -> Cursor | None:
        """The cursor a parked ``wait_for_event`` reads (opened if ``open_it``: a wait
        re-armed after a restore), ``None`` for any other wait."""
        pending = self.state.pending
        kind = wait.kind
        if not isinstance(kind, OnTopic) or pending is None or pending.call.name != "wait_for_event":
            return None
        cursors = self.tools.topic_cursors
        if open_it:
            return cursors.open(kind.topic, kind.metadata_match)
        return cursors.get(kind.topic, kind.metadata_match)

    def offer(self, message: Message) -> bool:
        """Buffer ``message`` (one that reached the crew another way than through these
        cursors) in every cursor it matches; whether one took it."""
        taken = False
        for cursor in self.open_cursors():
            topic, match = cursor.key
            if cursor_matches(topic, match, self.crew_id, message):
                taken = cursor.offer(message) or taken
        return taken

    def restore_cursors(self, saved: tuple[TopicCursorState, ...]) -> None:
        """Reopen the cursors a snapshot wrote down, with what they held."""
        for cursor in saved:
            self.tools.topic_cursors.restore(
                cursor.topic, cursor.metadata_match, cursor.buffered, cursor.missed, cursor.recent
            )

    def cursor_states(self) -> tuple[TopicCursorState, ...]:
        """The open cursors as data, least recently used first."""
        return tuple(
            TopicCursorState(
                cursor.key[0],
                cursor.key[1],
                tuple(cursor.pending()),
                cursor.subscription.dropped - cursor.reported_dropped + cursor.carried_missed,
                tuple(cursor.recent_ids()),
            )
            for cursor in self.open_cursors()
        )

    def state_with_cursors(self) -> AgentState:
        """The agent's state with its open cursors written down (for a snapshot)."""
        cursors = self.cursor_states()
        return attrs.evolve(self.state, cursors=cursors) if cursors else self.state

    def unread(self, seen: set[object], out: list[Message]) -> None:
        """Append to ``out`` what the cursors hold whose id is not in ``seen`` (added
        to it), cursor by cursor in arrival order."""
        for cursor in self.open_cursors():
            for message in cursor.pending():
                if message.id not in seen:
                    seen.add(message.id)
                    out.append(message)

    # -- waits ----------------------------------------------------------------------------

    def withdraw(self) -> bool:
        """Withdraw the parked wait and the mailbox watch (cursors stay open); ``True``
        if one of them had already fired (its outcome is on its way to the crew)."""
        in_flight = False
        for attr in ("wait", "pump"):
            wait: AsyncWait | None = getattr(self, attr)
            if wait is not None:
                if not wait.cancel():
                    in_flight = True
                setattr(self, attr, None)
        return in_flight

    def release(self) -> None:
        """Withdraw every wait and the model call in flight, and close the cursors (the
        snapshot, if any, holds what they had)."""
        self.withdraw_call()
        for wait in (self.wait, self.pump):
            if wait is not None:
                wait.cancel()
        self.wait = self.pump = None
        # A teller holds its crew: kept, it would tie the finished crew in a cycle; a
        # late outcome of a withdrawn wait then matches no token and is ignored.
        self.wait_token = self.pump_token = None
        if self._tools is not None:
            self._tools.topic_cursors.close()
