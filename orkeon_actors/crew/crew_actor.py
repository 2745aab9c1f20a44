"""``CrewActor``: a pykka actor that owns a crew's mailboxes, agents and orchestration.

One actor (one thread) per crew, whatever its number of agents. Agents are data driven
by the crew: the agent loop runs on the crew's thread, a wait tool call registers a
non-blocking hub wait (:func:`~orkeon_actors.hub.async_wait.wait_async`) whose outcome
comes back to the crew as an actor message, so no thread ever blocks on a wait.

Guarantees:

* the crew registers ``crew://{id}`` and ``agent://{id}/{agent}`` for each agent at
  start; mail to ``crew://`` is routed to one agent by :meth:`CrewActor.route`;
* an idle agent's mailbox is watched: mail wakes it through :meth:`CrewActor.on_message`
  (default: the message becomes the agent's next task);
* ``on_event(topic, deliver_to=agent address)`` bindings deliver every matching message
  to that agent's mailbox, in publish order;
* any failure (a model error, an exhausted budget, a broken hook, a mode that cannot go
  on) marks the crew ``FAILED`` with the cause in :attr:`CrewActor.failure`, cancels its
  waits and reports to the observer; the actor stays alive to answer queries and other
  crews are unaffected;
* an agent's ``wait_for_event`` reads its cursor for ``(topic, metadata_match)`` (the
  tools' :mod:`~orkeon_actors.tools.cursors`): what is published between two calls is
  returned by the next ones, in order, once each (bounded; drops reported as
  ``missed``); a call parks only on an empty cursor, so a crew waiting for a message
  never sits on an unread event of the topic it waits on;
* :meth:`CrewActor.snapshot` returns the whole crew as a :class:`CrewSnapshot`, the
  agents' cursors (and what they hold) included; a restore reopens them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol

import attrs
import pykka
from loguru import logger

from orkeon_actors.actors import PooledActor
from orkeon_actors.crew.agent import HUB_WAIT_TOOLS, Agent, BudgetLimits, agents_by_id
from orkeon_actors.crew.model import ChatMessage, ModelRequest, ToolCall
from orkeon_actors.crew.orchestration import PARKED, Orchestration, OrchestrationError
from orkeon_actors.crew.orchestration_state import OrchestrationState
from orkeon_actors.crew.snapshot import CrewOutcome, CrewSnapshot, to_json
from orkeon_actors.crew.state import (
    AgentState,
    AgentStatus,
    BudgetSnapshot,
    CrewFailure,
    CrewStatus,
    MailboxContent,
    OnMailbox,
    OnReply,
    OnTopic,
    PendingToolCall,
    PendingWait,
    TaskAssignment,
    TopicCursorState,
)
from orkeon_actors.errors import (
    BudgetExhaustedError,
    CancelledError,
    EventHubError,
    HubStoppedError,
    MailboxNotFoundError,
    SendTimeoutError,
    ToolValidationError,
    UnknownCorrelationError,
)
from orkeon_actors.hub.async_wait import (
    AsyncWait,
    PushSubscription,
    deliver_to_mailbox,
    push_subscription,
    receive_async,
    wait_async,
)
from orkeon_actors.hub.client import HubClient
from orkeon_actors.hub.memory import REPLY_TOPIC
from orkeon_actors.hub.port import EventHub, MailboxRegistration
from orkeon_actors.hub.routing import metadata_allows, scope_allows, topic_matches
from orkeon_actors.model.address import MailboxAddress, Scheme
from orkeon_actors.model.cancel import Budget
from orkeon_actors.model.ids import AgentId, CrewId, MessageId, new_ulid_str
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import (
    FOREVER,
    FiniteWaitTimeout,
    ForeverWaitTimeout,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
)
from orkeon_actors.tools import (
    EventHubTools,
    ReceiveMessageRequest,
    ReceiveMessageResponse,
    SendRequestRequest,
    SendRequestResponse,
    ToolError,
    ToolErrorResult,
    WaitForEventRequest,
    WaitForEventResponse,
    structure_request,
    unstructure,
)
from orkeon_actors.tools.cursors import Cursor
from orkeon_actors.tools.event_hub_tools import _field_of
from orkeon_actors.tools.payload import decode_payload

__all__ = [
    "CrewActor",
    "CrewObserver",
    "DeliveryGate",
    "EventBinding",
    "Activity",
    "hand_over",
    "restore_crew",
    "timed_out_message",
    "wait_matches",
]

_FATAL = (BudgetExhaustedError, CancelledError, HubStoppedError)


class CrewObserver(Protocol):
    """Receives a crew's trace (the simulation's recorder implements it)."""

    def record(self, crew_id: str, agent_id: str | None, kind: str, detail: str) -> None: ...


class DeliveryGate(Protocol):
    """Where a crew's actor messages go instead of its inbox when it has a gate (the
    simulation's :class:`~orkeon_actors.sim.gate.SerialGate`): every delivery to the
    crew (a wait's outcome, mail, a bound event, the start) is ``submit``-ted there, and
    the gate decides when the crew receives it. Without a gate (the normal runtime)
    deliveries are told to the actor directly."""

    def submit(self, ref: pykka.ActorRef[Any], message: Any) -> None: ...


class Activity:
    """Counts actor messages told to crews and not yet handled (quiescence detection)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_flight = 0
        self.sequence = 0

    def begin(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.sequence += 1

    def end(self) -> None:
        with self._lock:
            self.in_flight -= 1


@attrs.frozen
class EventBinding:
    """``on_event``: messages on ``topic`` (a pattern) land in ``deliver_to``."""

    topic: str
    deliver_to: MailboxAddress


# -- actor messages -------------------------------------------------------------------


@attrs.frozen(eq=False)
class _Start:
    pass


@attrs.frozen(eq=False)
class _WaitDone:
    agent_id: AgentId
    wait_id: str
    outcome: Message | BaseException


@attrs.frozen(eq=False)
class _Mail:
    """Mail taken from an idle agent's mailbox (``agent_id``) or from ``crew://``."""

    agent_id: AgentId | None
    wait_id: str
    outcome: Message | BaseException


@attrs.frozen(eq=False)
class _Bound:
    binding: EventBinding
    message: Message


@attrs.frozen(eq=False)
class _Query:
    what: str


@attrs.frozen(eq=False)
class _Restore:
    """Recompose the crew from ``snapshot`` instead of starting it (a wake)."""

    snapshot: CrewSnapshot
    on_cursors_open: Callable[[], None] | None = None
    """If given (the lifecycle supervisor): called on the crew's thread once the
    restored cursors are open again; the crew then reads nothing and handles nothing
    else until it is told :class:`_Handover` (the topic messages its cursors missed
    while they were closed)."""


@attrs.frozen(eq=False)
class _Handover:
    """What the lifecycle kept for a waking crew: topic messages published from the
    moment it began to sleep (or to wake) until its restored cursors were open, in
    publish order; each cursor catches up on those it matches (once each)."""

    messages: tuple[Message, ...]
    missed: Mapping[str, int] = attrs.field(factory=dict)
    """Drops per cursor key (``store.cursor_events.cursor_key``) while it slept."""


@attrs.frozen(eq=False)
class _Deliver:
    """A trigger for a parked agent (a topic message or reply that woke the crew)."""

    message: Message


@attrs.frozen(eq=False)
class _Passivate:
    """Sleep request (lifecycle): see :meth:`CrewActor._passivate`."""

    on_snapshot: Callable[[CrewSnapshot], None]
    on_refused: Callable[[str], None]
    on_passivated: Callable[[], None] | None = None
    """Called (on the crew's thread) once the live waits are withdrawn and the sleep is
    not refused: the snapshot reflects every message the crew consumed."""


@attrs.frozen(eq=False)
class _Resume:
    """The sleep failed: re-arm every withdrawn wait and go on."""


@attrs.frozen(eq=False)
class _Release:
    """The snapshot is durable: park the mailboxes, close the subscriptions, stop."""

    on_released: Callable[[], None]
    on_leftovers: Callable[[list[Message]], None] | None = None
    """Called (on the crew's thread, before ``on_released``) with the topic messages its
    cursors received after the snapshot was taken: the snapshot does not hold them."""


@attrs.frozen(eq=False)
class _CloseMailboxes:
    """The crew finished and its outcome is durable (lifecycle): close its mailbox
    registrations (later posts are refused with ``MailboxNotFoundError``) and stop the
    actor, so that a finished crew holds no memory; ``on_closed`` gets its outcome from
    ``on_stop``, after every message handled before the stop."""

    on_closed: Callable[[CrewOutcome], None]
    keep_final: bool = True
    """Put the crew's final state in its outcome (``CrewOutcome.final_json``)."""


class _AgentRuntime:
    """The live side of one agent: its definition, state, budget and hub handles.
    Touched only on the crew actor's thread."""

    def __init__(self, agent: Agent, crew: CrewActor) -> None:
        self.agent = agent
        self.state = AgentState(agent.agent_id, agent.role, budget=agent.budget.snapshot())
        self.budget = _make_budget(agent.budget, crew)
        self.client: HubClient = crew.hub.bind(crew.crew_id, agent.agent_id)
        self.address = MailboxAddress.agent(crew.crew_id, agent.agent_id)
        self.tools = EventHubTools(
            self.client,
            cancel=self.budget.token,
            register_own_mailbox=False,
            max_cursors=agent.max_cursors,
            max_buffered=agent.max_buffered,
        )
        self.registration: MailboxRegistration | None = None
        self.wait: AsyncWait | None = None
        self.wait_token: str | None = None
        self.pump: AsyncWait | None = None
        self.pump_token: str | None = None


def _make_budget(limits: BudgetLimits, crew: CrewActor) -> Budget:
    return Budget(
        max_wall_time=limits.max_wall_time,
        max_tokens=limits.max_tokens,
        max_tool_calls=limits.max_tool_calls,
        max_cost=limits.max_cost,
        clock=crew.hub.clock,
    )


class CrewActor(PooledActor):
    """A crew. Subclass it and override the hooks, or configure it by arguments.

    Start with ``CrewActor.start(hub, name=..., agents=[...], orchestration=...)``; the
    returned ``ActorRef`` is told :meth:`begin` through ``ref.proxy().begin()`` or
    :func:`start_crew`. Class attributes ``name``, ``idle_timeout`` and ``links`` give
    defaults to subclasses.

    Hooks (all run on the crew's thread; an exception fails the crew with its cause):

    * :meth:`route` picks the agent for mail to ``crew://``;
    * :meth:`on_message` handles mail reaching an idle agent;
    * :meth:`on_task_result` sees every answered task;
    * :meth:`on_crew_failed` sees the crew fail (``on_failure`` stays pykka's own hook).
    """

    name: ClassVar[str] = "crew"
    idle_timeout: ClassVar[float | None] = None
    links: ClassVar[tuple[Any, ...] | None] = None  # None: never declared (ACL permissive default)

    def __init__(
        self,
        hub: EventHub,
        *,
        agents: Sequence[Agent],
        orchestration: Orchestration,
        name: str | None = None,
        crew_id: CrewId | str | None = None,
        idle_timeout: float | timedelta | None = None,
        links: Sequence[Any] | None = None,
        bindings: Sequence[EventBinding] = (),
        acl: Any = None,
        observer: CrewObserver | None = None,
        activity: Activity | None = None,
        on_activity: Callable[[CrewId, CrewStatus], None] | None = None,
        gate: DeliveryGate | None = None,
    ) -> None:
        super().__init__()
        self.hub = hub
        self.crew_name: str = name or type(self).name
        declared = links if links is not None else type(self).links
        # None means "never declared"; an empty tuple is a declaration that closes the door (§10.2).
        self.links_declared: tuple[Any, ...] | None = None if declared is None else tuple(declared)
        if acl is not None:
            self.crew_id: CrewId = acl.register_crew(self.crew_name, crew_id, self.links_declared)
        else:
            self.crew_id = CrewId(crew_id) if crew_id is not None else CrewId.new()
        timeout = idle_timeout if idle_timeout is not None else type(self).idle_timeout
        self.idle_timeout_seconds: float | None = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        self.orchestrator = orchestration
        self.definitions = agents_by_id(agents)
        missing = [a for a in orchestration.agent_ids() if a not in self.definitions]
        if missing:
            raise ValueError(f"the {orchestration.mode} orchestration names agents the crew lacks: {missing}")
        self.orchestration: OrchestrationState = orchestration.initial_state()
        self.status = CrewStatus.CREATED
        self.result: str | None = None
        self.failure: CrewFailure | None = None
        self.bindings: list[EventBinding] = list(bindings)
        self.observer = observer
        self.activity = activity
        self.gate = gate
        self.client: HubClient = hub.bind(self.crew_id)
        self.address = MailboxAddress.crew(self.crew_id)
        self._agents: dict[AgentId, _AgentRuntime] = {}
        self._crew_registration: MailboxRegistration | None = None
        self._crew_pump: AsyncWait | None = None
        self._crew_pump_token: str | None = None
        self._subscriptions: list[PushSubscription] = []
        self._deferred: list[Callable[[], None]] = []
        self._on_activity = on_activity
        self._passivated = False
        self._on_released: Callable[[], None] | None = None
        self._on_leftovers: Callable[[list[Message]], None] | None = None
        self._on_closed: Callable[[], None] | None = None
        """Reports the finished crew's outcome once it stopped (see :class:`_CloseMailboxes`)."""
        self._snapshot_held: set[MessageId] = set()
        """Ids the cursors held when the last sleep snapshot was taken."""
        self._awaiting_handover = False
        self._cursors_open_notice: Callable[[], None] | None = None
        """Called once the restore's activity was reported (so the handover, and the
        activity after it, come later)."""
        self._held: list[Any] = []
        """Actor messages received while awaiting the handover, replayed after it."""

    # -- public API (call through the actor ref) ---------------------------------------

    def on_event(self, topic: str, deliver_to: MailboxAddress | str) -> EventBinding:
        """Bind ``topic`` (a pattern) to a mailbox of this crew: every matching message
        is delivered there (spec §13.2, dispatched). Call before or after start."""
        binding = EventBinding(topic, MailboxAddress.parse(deliver_to))
        if binding.deliver_to.crew_id != self.crew_id:
            raise ValueError(
                f"on_event delivers only to mailboxes of this crew ({self.crew_id}), not {binding.deliver_to}"
            )
        self.bindings.append(binding)
        if self.status is not CrewStatus.CREATED:
            self._subscribe(binding)
        return binding

    # -- hooks -------------------------------------------------------------------------

    def route(self, message: Message) -> AgentId:
        """The agent that receives mail sent to ``crew://{id}``: the ``agent`` metadata
        entry when it names one of the crew's agents, else the first agent."""
        wanted = message.metadata.get("agent")
        if wanted is not None and wanted in self._agents:
            return AgentId(wanted)
        return next(iter(self._agents))

    def on_message(self, agent_id: AgentId, message: Message) -> None:
        """Mail reached idle ``agent_id`` and the orchestration did not consume it. By
        default the message becomes the agent's next task."""
        payload, _ = decode_payload(message.payload)
        prompt = json.dumps(
            {
                "message": {
                    "topic": message.topic,
                    "source_crew_id": str(message.source_crew_id),
                    "source_agent_id": None if message.source_agent_id is None else str(message.source_agent_id),
                    "correlation_id": None if message.correlation_id is None else str(message.correlation_id),
                    "payload": payload,
                }
            },
            sort_keys=True,
        )
        self.assign(agent_id, f"message:{message.id}", prompt, origin="message")

    def on_task_result(self, agent_id: AgentId, task: TaskAssignment, output: str) -> None:
        """Every answered task (after the orchestration saw it). Default: nothing."""
        return None

    def on_crew_failed(self, failure: CrewFailure) -> None:
        """The crew just failed. Default: log it."""
        logger.warning("crew {} ({}) failed: {}", self.crew_id, self.crew_name, failure)

    # -- pykka -------------------------------------------------------------------------

    def on_start(self) -> None:
        for agent in self.definitions.values():
            self._agents[agent.agent_id] = _AgentRuntime(agent, self)

    def on_stop(self) -> None:
        if self._passivated:
            self._park_mailboxes()
            return
        try:
            self._release()
        finally:  # the supervisor forgets the crew only on this report: send it even if the close failed
            on_closed, self._on_closed = self._on_closed, None
            if on_closed is not None:
                on_closed()

    def on_receive(self, message: Any) -> Any:
        try:
            return self._dispatch(message)
        finally:
            if self.activity is not None and not isinstance(message, _Query):
                self.activity.end()

    def _dispatch(self, message: Any) -> Any:
        if isinstance(message, _Query):
            return self._query(message.what)
        if isinstance(message, _Passivate):
            self._passivate(message)
            return None
        if isinstance(message, _Release):
            self._passivated = True
            self._on_released = message.on_released  # called by on_stop, once the mailboxes are parked
            self._on_leftovers = message.on_leftovers
            self.actor_ref.stop(block=False)
            return None
        if isinstance(message, _CloseMailboxes):
            if self.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
                final = self._final_json() if message.keep_final else None
                outcome = CrewOutcome(self.status, self.result, self.failure, final)
                self._on_closed = lambda: message.on_closed(outcome)
                self.actor_ref.stop(block=False)  # on_stop releases and reports
            return None
        if self._awaiting_handover:
            if not isinstance(message, _Handover):
                self._held.append(message)  # replayed in order once the cursors caught up
                if self.activity is not None:
                    self.activity.begin()  # it stays in flight until replayed
                return None
            self._awaiting_handover = False
        if self.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            self._after_finish(message)
            return None
        try:
            if isinstance(message, _Start):
                self._begin()
            elif isinstance(message, _WaitDone):
                self._wait_done(message)
            elif isinstance(message, _Mail):
                self._mail(message)
            elif isinstance(message, _Bound):
                self._bound(message)
            elif isinstance(message, _Restore):
                self._restore(message.snapshot, message.on_cursors_open)
            elif isinstance(message, _Deliver):
                self._deliver(message.message)
            elif isinstance(message, _Handover):
                self._handover(message.messages, message.missed)
            elif isinstance(message, _Resume):
                self._rearm_all()
            while self._deferred and self.status not in (CrewStatus.COMPLETED, CrewStatus.FAILED):
                self._deferred.pop(0)()
        except Exception as exc:  # supervision: a crew failure is recorded, never lost
            logger.opt(exception=True).debug("crew {} failed", self.crew_id)
            self.fail(type(exc).__name__, str(exc) or repr(exc))
        if self.status not in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            busy = any(rt.state.status is AgentStatus.RUNNING for rt in self._agents.values())
            # Waking (its cursors catching up, its waits not re-armed yet) is not waiting.
            self._set_status(CrewStatus.RUNNING if busy or self._awaiting_handover else CrewStatus.WAITING)
        if self._on_activity is not None:
            self._on_activity(self.crew_id, self.status)
        notice, self._cursors_open_notice = self._cursors_open_notice, None
        if notice is not None:
            notice()
        if isinstance(message, _Handover):
            held, self._held = self._held, []
            for later in held:  # what arrived while the cursors caught up, in order
                try:
                    self._dispatch(later)
                finally:
                    if self.activity is not None:
                        self.activity.end()
        return None

    def _final_json(self) -> str | None:
        """The finished crew's final state for its outcome; ``None`` (logged) if it
        cannot be encoded: the outcome is reported either way."""
        try:
            return to_json(self.snapshot())
        except (TypeError, ValueError) as exc:
            logger.warning("crew {}: its final state could not be encoded for its outcome: {}", self.crew_id, exc)
            return None

    def _query(self, what: str) -> Any:
        if what == "snapshot":
            return self.snapshot()
        if what == "status":
            return self.status
        if what == "summary":
            return (self.status, self.result, self.failure)
        raise ValueError(f"unknown crew query {what!r}")

    def tell(self, message: Any) -> None:
        """Tell this crew (from any thread) and count it as in flight; with a gate, hand
        it to the gate instead (it counts it when it releases it)."""
        gate = self.gate
        if gate is not None:
            gate.submit(self.actor_ref, message)
            return
        if self.activity is not None:
            self.activity.begin()
        try:
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            if self.activity is not None:
                self.activity.end()

    # -- lifecycle ---------------------------------------------------------------------

    def _begin(self) -> None:
        if self.status is not CrewStatus.CREATED:
            return
        self._set_status(CrewStatus.RUNNING)
        self._register_mailboxes()
        for binding in self.bindings:
            self._subscribe(binding)
        self._arm_crew_pump()
        self.trace(None, "crew", f"started mode={self.orchestrator.mode} agents={','.join(self._agents)}")
        self.orchestrator.start(self)
        for agent_id, runtime in self._agents.items():
            if runtime.state.status is AgentStatus.IDLE:
                self._arm_pump(agent_id)

    def _register_mailboxes(self) -> None:
        """The crew's mailbox and every agent's, in one call (one store round trip on
        the durable hub; each reloads what was kept for it)."""
        runtimes = list(self._agents.values())
        crew, *agents = self.hub.register_mailboxes([self.address, *(rt.address for rt in runtimes)])
        self._crew_registration = crew
        for runtime, registration in zip(runtimes, agents, strict=True):
            runtime.registration = registration

    # -- sleep and wake (orkeon_actors.lifecycle) ----------------------------------------

    def _restore(self, snapshot: CrewSnapshot, on_cursors_open: Callable[[], None] | None = None) -> None:
        """Recompose the crew from ``snapshot`` (its definitions come from the factory
        that built this actor): agent states, orchestration state, budgets used; then
        register the mailboxes (the durable hub reloads what was kept for them, oldest
        first), re-arm every parked agent's wait with its remaining time, and deliver
        the timeout message of a wait that expired meanwhile. With ``on_cursors_open``
        the re-arming waits for the :class:`_Handover` (see :meth:`_handover`)."""
        if self.status is not CrewStatus.CREATED:
            return
        try:
            self._restore_state(snapshot)
        finally:
            if on_cursors_open is not None:
                self._awaiting_handover = True
                self._cursors_open_notice = on_cursors_open
        if not self._awaiting_handover:
            self._rearm_all()

    def _restore_state(self, snapshot: CrewSnapshot) -> None:
        if snapshot.id != self.crew_id:
            raise ValueError(f"snapshot of crew {snapshot.id} cannot restore crew {self.crew_id}")
        self.orchestration = snapshot.orchestration
        self.result = snapshot.result
        for state in snapshot.agents:
            runtime = self._agents.get(state.agent_id)
            if runtime is None:
                definition = self.orchestrator.restore_agent(self, state)
                self.definitions[definition.agent_id] = definition
                runtime = _AgentRuntime(definition, self)
                self._agents[definition.agent_id] = runtime
            runtime.state = attrs.evolve(state, cursors=())  # the live cursors hold them from now on
            for saved in state.cursors:
                runtime.tools.topic_cursors.restore(
                    saved.topic, saved.metadata_match, saved.buffered, saved.missed, saved.recent
                )
            runtime.budget.consume(tokens=state.budget.tokens_used, cost=state.budget.cost_used)
            runtime.budget.consume(tool_calls=state.budget.tool_calls_used)
        self._set_status(CrewStatus.RUNNING)
        self._register_mailboxes()
        for binding in self.bindings:
            self._subscribe(binding)
        self._arm_crew_pump()
        self.trace(None, "crew", f"woke mode={self.orchestrator.mode} agents={','.join(self._agents)}")

    def _handover(self, messages: Sequence[Message], missed: Mapping[str, int]) -> None:
        """The lifecycle's handover: every cursor catches up on the ``messages`` it
        matches and did not receive (published before it reopened; see
        :meth:`TopicCursors.catch_up`), then the waits are re-armed (a parked
        ``wait_for_event`` resolves with its cursor's oldest event) and the actor
        messages held meanwhile are handled, in order. ``missed``: what the store
        dropped per cursor while the crew slept (reported by the cursor's next read)."""
        from orkeon_actors.store.cursor_events import cursor_key

        for runtime in self._agents.values():
            cursors = runtime.tools.topic_cursors
            for cursor in cursors.cursors():
                topic, match = cursor.key
                cursor.carried_missed += missed.get(cursor_key(topic, match), 0)
                matching = [
                    m
                    for m in messages
                    if not m.topic.startswith("_system.")
                    and topic_matches(topic, m.topic)
                    and scope_allows(self.crew_id, m)
                    and metadata_allows(match, m)
                ]
                if matching:
                    cursors.catch_up(cursor, matching)
        self._rearm_all()

    def _rearm_all(self) -> None:
        """Re-arm the hub wait of every parked agent (and the pumps of idle agents) that
        has none; a wait whose ``expires_at`` passed gets its timeout message now."""
        if self._crew_pump is None and self._crew_registration is not None:
            self._arm_crew_pump()
        for agent_id, runtime in list(self._agents.items()):
            state = runtime.state
            if state.status is AgentStatus.IDLE:
                self._serve_inbox_or_pump(agent_id)
                continue
            pending = state.pending
            if state.status is not AgentStatus.WAITING or pending is None or pending.wait is None:
                continue
            if runtime.wait is not None:
                continue
            wait = pending.wait
            now = self.hub.clock.now()
            if wait.expires_at is not None and wait.expires_at <= now:
                self._wait_done_now(runtime, timed_out_message(self.crew_id, wait, now))
                continue
            timeout: WaitTimeout = (
                FOREVER if wait.expires_at is None else FiniteWaitTimeout((wait.expires_at - now).total_seconds())
            )
            self._rearm(runtime, wait, timeout)

    def _rearm(self, runtime: _AgentRuntime, wait: PendingWait, timeout: WaitTimeout) -> None:
        kind = wait.kind
        descriptor: WaitDescriptor
        if isinstance(kind, OnTopic):
            descriptor = WaitOnTopic(kind.topic, kind.metadata_match)
        elif isinstance(kind, OnMailbox):
            descriptor = WaitOnMailbox(kind.address)
        else:
            descriptor = WaitOnReply(kind.correlation)
        agent_id = runtime.agent.agent_id
        token = new_ulid_str()

        def on_done(outcome: Message | BaseException) -> None:
            self.tell(_WaitDone(agent_id, token, outcome))

        cursor = self._cursor_of(runtime, wait, open_it=True)
        try:
            if cursor is not None:
                ready = cursor.poll()
                if ready is not None:  # the cursor holds events: the wait resolves now
                    self._wait_done_now(runtime, ready)
                    return
                new = receive_async(
                    self.hub, cursor.subscription, timeout, runtime.budget.token, _recording(cursor, on_done)
                )
            else:
                new = wait_async(self.hub, runtime.client.caller, descriptor, timeout, runtime.budget.token, on_done)
        except UnknownCorrelationError as exc:  # the request is gone (another process): it timed out
            self._wait_done_now(runtime, exc)
            return
        runtime.wait = new
        runtime.wait_token = token

    def _wait_done_now(self, runtime: _AgentRuntime, outcome: Message | BaseException) -> None:
        token = new_ulid_str()
        runtime.wait_token = token
        self._wait_done(_WaitDone(runtime.agent.agent_id, token, outcome))

    def _deliver(self, message: Message) -> None:
        """Hand ``message`` to the first parked agent whose wait it matches (withdrawing
        that agent's live wait; a ``wait_for_event`` gets it through its cursor, which
        ignores a message it already handed out or holds). The other agents' cursors it
        matches buffer it too, as their subscriptions would have had the crew been
        awake. A message nothing matches any more is dropped."""
        for runtime in self._agents.values():
            pending = runtime.state.pending
            if runtime.state.status is not AgentStatus.WAITING or pending is None or pending.wait is None:
                continue
            if not wait_matches(pending.wait, self.crew_id, message):
                continue
            cursor = self._cursor_of(runtime, pending.wait)
            if cursor is not None and runtime.wait is not None:
                cursor.offer(message)  # the live wait on the cursor takes it (or already has)
            else:
                if runtime.wait is not None and not runtime.wait.cancel():
                    continue  # its live wait already took a message: that one wins
                runtime.wait = None
                self._wait_done_now(runtime, message)
            self._offer_to_cursors(message, [rt for rt in self._agents.values() if rt is not runtime])
            return
        if not self._offer_to_cursors(message, list(self._agents.values())):
            logger.debug("crew {}: trigger {} matched no parked agent any more", self.crew_id, message.id)

    # -- wait_for_event cursors (spec §5.2; orkeon_actors.tools.cursors) -----------------

    def _cursor_of(self, runtime: _AgentRuntime, wait: PendingWait, *, open_it: bool = False) -> Cursor | None:
        """The cursor a parked ``wait_for_event`` reads (opened if ``open_it``: a wait
        re-armed after a restore), ``None`` for any other wait."""
        pending = runtime.state.pending
        kind = wait.kind
        if not isinstance(kind, OnTopic) or pending is None or pending.call.name != "wait_for_event":
            return None
        cursors = runtime.tools.topic_cursors
        if open_it:
            return cursors.open(kind.topic, kind.metadata_match)
        return cursors.get(kind.topic, kind.metadata_match)

    def _offer_to_cursors(self, message: Message, runtimes: Sequence[_AgentRuntime]) -> bool:
        """Buffer ``message`` (one that reached the crew another way than through these
        cursors) in every cursor of ``runtimes`` it matches; whether one took it."""
        if message.topic.startswith("_system.") or not scope_allows(self.crew_id, message):
            return False
        taken = False
        for runtime in runtimes:
            for cursor in runtime.tools.topic_cursors.cursors():
                topic, match = cursor.key
                if topic_matches(topic, message.topic) and metadata_allows(match, message):
                    taken = cursor.offer(message) or taken
        return taken

    def _cursor_states(self, runtime: _AgentRuntime) -> tuple[TopicCursorState, ...]:
        """``runtime``'s open cursors as data, least recently used first."""
        return tuple(
            TopicCursorState(
                cursor.key[0],
                cursor.key[1],
                tuple(cursor.pending()),
                cursor.subscription.dropped - cursor.reported_dropped + cursor.carried_missed,
                tuple(cursor.recent_ids()),
            )
            for cursor in runtime.tools.topic_cursors.cursors()
        )

    def _passivate(self, message: _Passivate) -> None:
        """Sleep request. Refused (``on_refused(reason)``) unless the crew is waiting
        for a message: every agent idle or parked, nothing queued for this actor. Else
        ``on_snapshot(snapshot)`` is called (on this thread) *before* the live waits are
        withdrawn, so a trigger published meanwhile is seen by the supervisor; if a
        wait's outcome is already in flight, the sleep is refused and the waits re-armed."""
        busy = any(rt.state.status is AgentStatus.RUNNING for rt in self._agents.values())
        if self._awaiting_handover:
            message.on_refused("crew is still waking (its cursors are catching up)")
            return
        if self.status is not CrewStatus.WAITING or busy or self._deferred or not self.actor_inbox.empty():
            message.on_refused(f"crew is {self.status.value}" + (" with work queued" if not busy else ""))
            return
        snapshot = self.snapshot()
        self._snapshot_held = {m.id for state in snapshot.agents for c in state.cursors for m in c.buffered}
        message.on_snapshot(snapshot)
        in_flight = False
        for runtime in self._agents.values():
            for attr in ("wait", "pump"):
                wait = getattr(runtime, attr)
                if wait is not None:
                    if not wait.cancel():
                        in_flight = True
                    setattr(runtime, attr, None)
        if self._crew_pump is not None:
            if not self._crew_pump.cancel():
                in_flight = True
            self._crew_pump = None
        if in_flight or not self.actor_inbox.empty():
            message.on_refused("a message reached the crew while it was being snapshotted")
        elif message.on_passivated is not None:
            message.on_passivated()

    def _cursor_leftovers(self) -> list[Message]:
        """What the cursors received after the sleep snapshot was taken (not in it),
        each message once, cursor by cursor in arrival order."""
        seen = set(self._snapshot_held)
        out: list[Message] = []
        for runtime in self._agents.values():
            for cursor in runtime.tools.topic_cursors.cursors():
                for message in cursor.pending():
                    if message.id not in seen:
                        seen.add(message.id)
                        out.append(message)
        return out

    def _park_mailboxes(self) -> None:
        """Passivated stop: release waits and subscriptions; the mailboxes stay durably
        registered (their messages are kept in the store until the crew wakes)."""
        from orkeon_actors.store.durable_hub import SqliteEventHub

        if self._on_leftovers is not None:
            self._on_leftovers(self._cursor_leftovers())
        self._release_waits()
        hub = self.hub
        registrations = [rt.registration for rt in self._agents.values()]
        registrations.append(self._crew_registration)
        held = [registration for registration in registrations if registration is not None]
        if isinstance(hub, SqliteEventHub):
            hub.park_mailboxes(held)
        else:
            hub.close_mailboxes(held)
        for runtime in self._agents.values():
            runtime.registration = None
        self._crew_registration = None
        if self._on_released is not None:
            self._on_released()

    def complete(self, result: str) -> None:
        """The orchestration finished: record ``result``, release waits and mailboxes."""
        if self.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            return
        self.result = result
        self._set_status(CrewStatus.COMPLETED)
        self.trace(None, "crew", f"completed result={_short(result)}")
        self._release_waits()

    def fail(self, error_type: str, message: str, agent_id: AgentId | None = None) -> None:
        """Mark the crew failed with its cause (idempotent: the first cause wins)."""
        if self.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            return
        self.failure = CrewFailure(error_type, message, agent_id)
        self._set_status(CrewStatus.FAILED)
        self.trace(agent_id, "crew", f"failed {self.failure}")
        self._release_waits()
        try:
            self.on_crew_failed(self.failure)
        except Exception:
            logger.opt(exception=True).error("on_crew_failed hook of crew {} raised", self.crew_id)

    def _set_status(self, status: CrewStatus) -> None:
        if status is not self.status:
            self.status = status

    def _release_waits(self) -> None:
        for runtime in self._agents.values():
            for wait in (runtime.wait, runtime.pump):
                if wait is not None:
                    wait.cancel()
            runtime.wait = runtime.pump = None
            runtime.tools.topic_cursors.close()  # the snapshot (if any) holds what they had
        if self._crew_pump is not None:
            self._crew_pump.cancel()
            self._crew_pump = None
        for sub in self._subscriptions:
            sub.close()
        self._subscriptions.clear()

    def _release(self) -> None:
        self._release_waits()
        held = [rt.registration for rt in self._agents.values() if rt.registration is not None]
        if self._crew_registration is not None:
            held.append(self._crew_registration)
        if held:
            self.hub.close_mailboxes(held)  # one store round trip on the durable hub
        for runtime in self._agents.values():
            runtime.registration = None
        self._crew_registration = None

    def _after_finish(self, message: Any) -> None:
        """A late outcome for a finished crew: nothing to do (waits were withdrawn; a
        message taken meanwhile stays recorded in the agent's inbox)."""
        outcome = getattr(message, "outcome", None)
        agent_id = getattr(message, "agent_id", None)
        if isinstance(outcome, Message) and not outcome.is_timeout and agent_id in self._agents:
            runtime = self._agents[agent_id]
            if isinstance(message, _Mail):
                runtime.state = attrs.evolve(runtime.state, inbox=(*runtime.state.inbox, outcome))

    # -- orchestration API ---------------------------------------------------------------

    def set_orchestration(self, state: OrchestrationState, reason: str) -> None:
        """Replace the orchestration state (a transition, recorded in the trace)."""
        self.orchestration = state
        self.trace(None, "transition", reason)
        if self._on_activity is not None:
            self._on_activity(self.crew_id, self.status)

    def agent_state(self, agent_id: AgentId) -> AgentState:
        return self._agents[agent_id].state

    def assign(self, agent_id: AgentId | str, task_id: str, prompt: str, *, origin: str = "orchestration") -> None:
        """Give ``agent_id`` a task: the prompt is appended to its conversation and its
        loop runs until it answers or parks. The agent must be idle."""
        runtime = self._agents[AgentId(agent_id)]
        if runtime.state.status not in (AgentStatus.IDLE, AgentStatus.DONE):
            raise OrchestrationError(
                f"agent {agent_id} is busy ({runtime.state.status.value}); cannot assign {task_id}"
            )
        if runtime.pump is not None:
            runtime.pump.cancel()
            runtime.pump = None
        conversation = runtime.state.conversation
        if not conversation and runtime.agent.instructions:
            conversation = (ChatMessage("system", runtime.agent.instructions),)
        runtime.state = attrs.evolve(
            runtime.state,
            status=AgentStatus.RUNNING,
            task=TaskAssignment(task_id, prompt, origin),
            conversation=(*conversation, ChatMessage("user", prompt)),
            turns=0,
        )
        self.trace(runtime.agent.agent_id, "task", f"{task_id}: {_short(prompt)}")
        self._run(runtime)

    def cancel_agent(self, agent_id: AgentId) -> None:
        """Stop ``agent_id``'s current task (its wait is withdrawn); it becomes idle."""
        runtime = self._agents[agent_id]
        if runtime.wait is not None:
            runtime.wait.cancel()
            runtime.wait = None
        if runtime.state.status in (AgentStatus.RUNNING, AgentStatus.WAITING):
            runtime.state = attrs.evolve(
                runtime.state, status=AgentStatus.IDLE, task=None, pending=None, queued_calls=()
            )
            self.trace(agent_id, "agent", "cancelled")

    def add_agent(self, agent: Agent) -> None:
        """Add an agent while running (autonomous spawning): its mailbox is registered."""
        if agent.agent_id in self._agents:
            raise OrchestrationError(f"an agent {agent.agent_id!r} already exists in crew {self.crew_id}")
        self.definitions[agent.agent_id] = agent
        runtime = _AgentRuntime(agent, self)
        runtime.registration = self.hub.register_mailbox(runtime.address)
        self._agents[agent.agent_id] = runtime
        self.trace(agent.agent_id, "agent", f"spawned role={agent.role}")

    def resume_with(self, agent_id: AgentId, call_id: str, result: Mapping[str, Any]) -> None:
        """Inject ``result`` as the answer of ``agent_id``'s parked call ``call_id``
        (delegations) and let the agent go on."""
        runtime = self._agents[agent_id]
        pending = runtime.state.pending
        if pending is None or pending.call.id != call_id:
            raise OrchestrationError(f"agent {agent_id} is not parked on call {call_id}")
        self._inject(runtime, pending.call, dict(result))

    def defer(self, action: Callable[[], None]) -> None:
        """Run ``action`` on this crew's thread once the current step is over (a mode
        starting work from inside a tool call, before the caller parked)."""
        self._deferred.append(action)

    def agent_ids(self) -> list[AgentId]:
        return list(self._agents)

    def trace(self, agent_id: str | None, kind: str, detail: str) -> None:
        if self.observer is not None:
            self.observer.record(str(self.crew_id), None if agent_id is None else str(agent_id), kind, detail)

    # -- the agent loop ----------------------------------------------------------------

    def _run(self, runtime: _AgentRuntime) -> None:
        """Drive ``runtime`` until it answers its task, parks, or fails."""
        agent = runtime.agent
        while runtime.state.status is AgentStatus.RUNNING:
            try:
                runtime.budget.raise_if_exhausted()
                if runtime.state.queued_calls:
                    call, *rest = runtime.state.queued_calls
                    runtime.state = attrs.evolve(runtime.state, queued_calls=tuple(rest))
                    runtime.budget.consume(tool_calls=1)
                    runtime.budget.raise_if_exhausted()
                    result = self._run_tool(runtime, call)
                    if result is PARKED:
                        return
                    self._append_tool_result(runtime, call, result)
                    continue
                if runtime.state.turns >= agent.max_turns:
                    raise OrchestrationError(
                        f"agent {agent.agent_id} made {agent.max_turns} model calls without answering its task "
                        "(max_turns); end its script with a text answer or raise max_turns"
                    )
                request = ModelRequest(
                    str(self.crew_id),
                    str(agent.agent_id),
                    agent.role,
                    agent.instructions,
                    runtime.state.conversation,
                    tuple(self._tool_definitions(runtime)),
                    runtime.state.turns,
                )
                response = agent.model.complete(request)
                runtime.budget.consume(tokens=response.usage.total_tokens, cost=response.usage.cost)
                runtime.state = attrs.evolve(
                    runtime.state,
                    conversation=(
                        *runtime.state.conversation,
                        ChatMessage("assistant", response.text, response.tool_calls),
                    ),
                    turns=runtime.state.turns + 1,
                    budget=self._budget_snapshot(runtime),
                )
                runtime.budget.raise_if_exhausted()
                if response.tool_calls:
                    runtime.state = attrs.evolve(runtime.state, queued_calls=response.tool_calls)
                    continue
                self._finish_task(runtime, response.text)
            except Exception as exc:
                self._agent_failed(runtime, exc)
                return

    def _finish_task(self, runtime: _AgentRuntime, output: str) -> None:
        task = runtime.state.task
        runtime.state = attrs.evolve(
            runtime.state, status=AgentStatus.IDLE, task=None, budget=self._budget_snapshot(runtime)
        )
        agent_id = runtime.agent.agent_id
        self.trace(agent_id, "answer", _short(output))
        if task is not None and task.origin == "orchestration":
            self.orchestrator.on_task_done(self, agent_id, task.task_id, output)
        if task is not None:
            self.on_task_result(agent_id, task, output)
        if self.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            return
        if runtime.state.status is AgentStatus.IDLE:
            self._serve_inbox_or_pump(agent_id)

    def _agent_failed(self, runtime: _AgentRuntime, exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        snapshot = self._budget_snapshot(runtime)
        if isinstance(exc, BudgetExhaustedError):
            snapshot = attrs.evolve(snapshot, exhausted_reason=str(exc))
        runtime.state = attrs.evolve(runtime.state, status=AgentStatus.FAILED, failure=reason, budget=snapshot)
        if runtime.wait is not None:
            runtime.wait.cancel()
            runtime.wait = None
        self.trace(runtime.agent.agent_id, "agent", f"failed {reason}")
        self.fail(type(exc).__name__, str(exc), runtime.agent.agent_id)

    def _budget_snapshot(self, runtime: _AgentRuntime) -> BudgetSnapshot:
        budget = runtime.budget
        return attrs.evolve(
            runtime.state.budget,
            tokens_used=budget.tokens_used,
            tool_calls_used=budget.tool_calls_used,
            cost_used=budget.cost_used,
            wall_time_used=max(0.0, self.hub.clock.monotonic() - budget.started_at),
            exhausted_reason=budget.reason,
        )

    def _tool_definitions(self, runtime: _AgentRuntime) -> list[Mapping[str, Any]]:
        defs: list[Mapping[str, Any]] = []
        if runtime.agent.hub_tools:
            defs.extend(EventHubTools.definitions())
        defs.extend(t.definition() for t in runtime.agent.tools)
        defs.extend(self.orchestrator.tool_definitions(runtime.agent.agent_id))
        return defs

    def _append_tool_result(self, runtime: _AgentRuntime, call: ToolCall, result: Mapping[str, Any]) -> None:
        content = json.dumps(result, sort_keys=True, default=str)
        runtime.state = attrs.evolve(
            runtime.state,
            conversation=(
                *runtime.state.conversation,
                ChatMessage("tool", content, tool_call_id=call.id, name=call.name),
            ),
        )
        self.trace(runtime.agent.agent_id, "tool_result", f"{call.name} -> {_redact(result)}")

    # -- tools -------------------------------------------------------------------------

    def _run_tool(self, runtime: _AgentRuntime, call: ToolCall) -> Any:
        agent = runtime.agent
        self.trace(agent.agent_id, "tool_call", f"{call.name} {_redact_text(call.arguments)}")
        orchestrated = self.orchestrator.on_tool_call(self, agent.agent_id, call)
        if orchestrated is PARKED:
            runtime.state = attrs.evolve(
                runtime.state, status=AgentStatus.WAITING, pending=PendingToolCall(call, delegation_id=call.id)
            )
            self.orchestrator.on_agent_status(self, agent.agent_id, AgentStatus.WAITING)
            return PARKED
        if orchestrated is not None:
            return orchestrated
        for tool in agent.tools:
            if tool.name == call.name:
                return self._run_user_tool(tool.fn, call)
        if agent.hub_tools and call.name in HUB_WAIT_TOOLS:
            return self._start_wait_tool(runtime, call)
        if agent.hub_tools:
            return runtime.tools.invoke(call.name, call.arguments, errors="result")
        return _error_result(ToolValidationError(f"unknown tool {call.name!r}"), None)

    @staticmethod
    def _run_user_tool(fn: Any, call: ToolCall) -> dict[str, Any]:
        try:
            arguments = call.parsed_arguments()
        except ValueError as exc:
            return _error_result(ToolValidationError(f"the arguments are not valid JSON: {exc}"), None)
        try:
            value = fn(arguments)
        except _FATAL:
            raise
        except Exception as exc:  # a broken user tool is a result the model reads, not a crash
            return _error_result(exc, getattr(exc, "field", None))
        return dict(value) if isinstance(value, Mapping) else {"result": value}

    def _start_wait_tool(self, runtime: _AgentRuntime, call: ToolCall) -> Any:
        """Validate a waiting tool call exactly as the tool does, then park on a
        non-blocking hub wait; the result is formatted by the tool's DTOs when the wait
        resolves, so the model reads the same thing as from ``EventHubTools.invoke``."""
        name = call.name
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
            descriptor: WaitDescriptor
            timeout: WaitTimeout
            cursor: Cursor | None = None
            if name == "wait_for_event":
                wreq = structure_request(arguments, WaitForEventRequest)
                cursor = runtime.tools.topic_cursors.open(wreq.topic, wreq.metadata_match)
                ready = cursor.poll()
                if ready is not None:  # published since the previous call: no need to park
                    self.trace(runtime.agent.agent_id, "message", _describe_message(ready))
                    return _result(WaitForEventResponse(False, message=ready, missed=cursor.take_missed()))
                descriptor = WaitOnTopic(wreq.topic, wreq.metadata_match)
                timeout = _wait_timeout(wreq.wait_forever, wreq.timeout_ms)
            elif name == "receive_message":
                rreq = structure_request(arguments, ReceiveMessageRequest)
                mailbox = rreq.mailbox if rreq.mailbox is not None else runtime.address
                if mailbox.scheme not in (Scheme.AGENT, Scheme.CREW) or mailbox.crew_id != self.crew_id:
                    raise ToolValidationError(
                        f"receive_message reads only mailboxes of your own crew ({self.crew_id}): "
                        f"agent://{self.crew_id}/{{agent}} or crew://{self.crew_id}; omit mailbox to read your "
                        f"own ({runtime.address}), {mailbox} is not one of them",
                        field="mailbox",
                    )
                if mailbox == runtime.address and runtime.state.inbox:
                    first, *rest = runtime.state.inbox
                    runtime.state = attrs.evolve(runtime.state, inbox=tuple(rest))
                    return _result(ReceiveMessageResponse(False, message=first))
                descriptor = WaitOnMailbox(mailbox)
                timeout = _wait_timeout(rreq.wait_forever, rreq.timeout_ms)
            else:
                sreq = structure_request(arguments, SendRequestRequest)
                if sreq.target_mailbox.scheme is Scheme.TOPIC:
                    raise ToolValidationError(
                        "send_request needs a mailbox that can answer (agent://, crew:// or client://); "
                        "a topic has no single recipient: use publish_event to broadcast",
                        field="target_mailbox",
                    )
                seconds = sreq.timeout_ms / 1000
                sent = runtime.client.request(
                    sreq.target_mailbox, sreq.payload, seconds, sreq.metadata, cancel=runtime.budget.token
                )
                assert sent.correlation_id is not None
                descriptor = WaitOnReply(sent.correlation_id)
                timeout = FiniteWaitTimeout(seconds)
            return self._park(runtime, call, descriptor, timeout, cursor)
        except ValueError as exc:
            if isinstance(exc, EventHubError):
                return _error_result(exc, _field_of(name, exc))
            return _error_result(ToolValidationError(f"the arguments are not valid JSON: {exc}"), None)
        except (MailboxNotFoundError, UnknownCorrelationError) as exc:
            return _error_result(exc, _field_of(name, exc))
        except _FATAL:
            raise
        except EventHubError as exc:
            return _error_result(exc, _field_of(name, exc))

    def _park(
        self,
        runtime: _AgentRuntime,
        call: ToolCall,
        descriptor: WaitDescriptor,
        timeout: WaitTimeout,
        cursor: Cursor | None = None,
    ) -> Any:
        """Park the agent on ``descriptor`` (on ``cursor``'s subscription for a
        ``wait_for_event``: what the cursor receives from now on resolves it)."""
        agent_id = runtime.agent.agent_id
        token = new_ulid_str()

        def on_done(outcome: Message | BaseException) -> None:
            self.tell(_WaitDone(agent_id, token, outcome))

        # The outcome may arrive before wait_async returns: it is told to this actor and
        # handled after this call, once runtime.wait_token is set.
        if cursor is not None:
            taken = _recording(cursor, on_done)
            wait = receive_async(self.hub, cursor.subscription, timeout, runtime.budget.token, taken)
        else:
            wait = wait_async(self.hub, runtime.client.caller, descriptor, timeout, runtime.budget.token, on_done)
        runtime.wait = wait
        runtime.wait_token = token
        expires = (
            None if isinstance(timeout, ForeverWaitTimeout) else wait.started_at + timedelta(seconds=timeout.seconds)
        )
        if isinstance(descriptor, WaitOnTopic):
            kind: OnTopic | OnMailbox | OnReply = OnTopic(descriptor.topic, self.crew_id, descriptor.metadata_match)
        elif isinstance(descriptor, WaitOnMailbox):
            kind = OnMailbox(descriptor.address)
        else:
            kind = OnReply(descriptor.correlation)
        runtime.state = attrs.evolve(
            runtime.state,
            status=AgentStatus.WAITING,
            pending=PendingToolCall(call, PendingWait(wait.wait_id, wait.started_at, expires, kind)),
            budget=self._budget_snapshot(runtime),
        )
        self.trace(agent_id, "park", f"{call.name} on {_describe(descriptor)}")
        self.orchestrator.on_agent_status(self, agent_id, AgentStatus.WAITING)
        return PARKED

    def _wait_done(self, message: _WaitDone) -> None:
        runtime = self._agents.get(message.agent_id)
        if runtime is None:
            return
        pending = runtime.state.pending
        outcome = message.outcome
        if pending is None or pending.wait is None or runtime.wait_token != message.wait_id:
            if isinstance(outcome, Message) and not outcome.is_timeout and outcome.target_mailbox == runtime.address:
                runtime.state = attrs.evolve(runtime.state, inbox=(*runtime.state.inbox, outcome))
            elif isinstance(outcome, Message) and not outcome.is_timeout and outcome.target_mailbox is None:
                self._offer_to_cursors(outcome, [runtime])  # a withdrawn cursor wait's late message: back
            return
        runtime.wait = None
        runtime.wait_token = None
        call = pending.call
        if isinstance(outcome, _FATAL):
            self._agent_failed(runtime, outcome)
            return
        missed = 0
        cursor = self._cursor_of(runtime, pending.wait)
        if cursor is not None:
            if isinstance(outcome, Message) and not outcome.is_timeout:
                cursor.handed_out(outcome)
            missed = cursor.take_missed()
        if isinstance(outcome, Message):
            self.trace(runtime.agent.agent_id, "message", _describe_message(outcome))
        result = _format_wait_result(call.name, pending.wait.kind, outcome, missed)
        self._inject(runtime, call, result)

    def _inject(self, runtime: _AgentRuntime, call: ToolCall, result: Mapping[str, Any]) -> None:
        runtime.state = attrs.evolve(runtime.state, status=AgentStatus.RUNNING, pending=None)
        self._append_tool_result(runtime, call, result)
        self.orchestrator.on_agent_status(self, runtime.agent.agent_id, AgentStatus.RUNNING)
        self._run(runtime)

    # -- mail: idle agents' mailboxes, crew://, bindings ---------------------------------

    def _arm_pump(self, agent_id: AgentId) -> None:
        runtime = self._agents[agent_id]
        if runtime.pump is not None or runtime.registration is None:
            return
        token = new_ulid_str()

        def on_done(outcome: Message | BaseException) -> None:
            self.tell(_Mail(agent_id, token, outcome))

        runtime.pump_token = token
        runtime.pump = wait_async(self.hub, self.client.caller, WaitOnMailbox(runtime.address), FOREVER, None, on_done)

    def _arm_crew_pump(self) -> None:
        token = new_ulid_str()

        def on_done(outcome: Message | BaseException) -> None:
            self.tell(_Mail(None, token, outcome))

        self._crew_pump_token = token
        self._crew_pump = wait_async(self.hub, self.client.caller, WaitOnMailbox(self.address), FOREVER, None, on_done)

    def _serve_inbox_or_pump(self, agent_id: AgentId) -> None:
        runtime = self._agents[agent_id]
        if runtime.state.inbox:
            first, *rest = runtime.state.inbox
            runtime.state = attrs.evolve(runtime.state, inbox=tuple(rest))
            self._handle_mail(agent_id, first)
        elif runtime.state.status is AgentStatus.IDLE:
            self._arm_pump(agent_id)

    def _mail(self, message: _Mail) -> None:
        outcome = message.outcome
        if message.agent_id is None:
            if self._crew_pump_token != message.wait_id:
                return  # a withdrawn pump's late outcome
            self._crew_pump = None
            self._crew_pump_token = None
            if isinstance(outcome, BaseException):
                raise outcome
            self.trace(None, "message", f"crew mailbox {_describe_message(outcome)}")
            target = self.route(outcome)
            deliver_to_mailbox(self.hub, outcome, MailboxAddress.agent(self.crew_id, target))
            self._arm_crew_pump()
            return
        runtime = self._agents[message.agent_id]
        if runtime.pump_token == message.wait_id:
            runtime.pump = None
            runtime.pump_token = None
        elif not isinstance(outcome, Message):
            return  # a withdrawn pump's late error
        if isinstance(outcome, BaseException):
            raise outcome
        if runtime.state.status is not AgentStatus.IDLE:
            runtime.state = attrs.evolve(runtime.state, inbox=(*runtime.state.inbox, outcome))
            return
        self._handle_mail(message.agent_id, outcome)

    def _handle_mail(self, agent_id: AgentId, message: Message) -> None:
        self.trace(agent_id, "message", _describe_message(message))
        if not self.orchestrator.on_agent_mail(self, agent_id, message):
            self.on_message(agent_id, message)
        if self.status not in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            runtime = self._agents[agent_id]
            if runtime.state.status is AgentStatus.IDLE:
                self._serve_inbox_or_pump(agent_id)

    def _subscribe(self, binding: EventBinding) -> None:
        def on_message(message: Message) -> None:
            self.tell(_Bound(binding, message))

        self._subscriptions.append(push_subscription(self.hub, self.client.caller, binding.topic, on_message))

    def _bound(self, message: _Bound) -> None:
        sub = next((s for s in self._subscriptions if s.pattern == message.binding.topic), None)
        consumed = sub.consume(message.message) if sub is not None else message.message
        if consumed is None:
            return
        self.trace(None, "event", f"{consumed.topic} -> {message.binding.deliver_to}")
        deliver_to_mailbox(self.hub, consumed, message.binding.deliver_to)

    # -- snapshot ----------------------------------------------------------------------

    def snapshot(self) -> CrewSnapshot:
        """The crew as data (spec §8.1). Pending waits are the parked agents' waits;
        ``mailboxes`` holds the messages the crew took for busy agents (their inboxes)."""
        agents = tuple(
            attrs.evolve(rt.state, cursors=cursors) if (cursors := self._cursor_states(rt)) else rt.state
            for rt in self._agents.values()
        )
        waits = tuple(s.pending.wait for s in agents if s.pending is not None and s.pending.wait is not None)
        mailboxes = tuple(
            MailboxContent(MailboxAddress.agent(self.crew_id, s.agent_id), s.inbox) for s in agents if s.inbox
        )
        budget = BudgetSnapshot(
            tokens_used=sum(s.budget.tokens_used for s in agents),
            tool_calls_used=sum(s.budget.tool_calls_used for s in agents),
            cost_used=sum(s.budget.cost_used for s in agents),
            exhausted_reason=next((s.budget.exhausted_reason for s in agents if s.budget.exhausted_reason), None),
        )
        return CrewSnapshot(
            self.crew_id,
            self.crew_name,
            self.orchestrator.mode,
            self.orchestration,
            agents,
            budget,
            mailboxes,
            waits,
            self.hub.clock.now(),
            status=self.status.value,
            result=self.result,
            failure=None if self.failure is None else str(self.failure),
        )


# -- helpers ----------------------------------------------------------------------------


def start_crew(
    ref: pykka.ActorRef[CrewActor], activity: Activity | None = None, gate: DeliveryGate | None = None
) -> None:
    """Begin a started crew actor (registers its mailboxes, starts its orchestration).
    Pass the crew's ``activity`` counter if it has one, its ``gate`` if it has one (the
    start is then submitted to the gate like any other delivery)."""
    if gate is not None:
        gate.submit(ref, _Start())
        return
    if activity is not None:
        activity.begin()
    ref.tell(_Start())


def restore_crew(
    ref: pykka.ActorRef[CrewActor],
    snapshot: CrewSnapshot,
    activity: Activity | None = None,
    gate: DeliveryGate | None = None,
    on_cursors_open: Callable[[], None] | None = None,
) -> None:
    """Begin a started crew actor from ``snapshot`` (a wake) instead of from scratch
    (through its ``gate`` if it has one). With ``on_cursors_open`` (the lifecycle
    supervisor) the crew calls it once its cursors are open again and then waits, its
    waits not re-armed and anything told to it held, until :func:`hand_over` gives it
    the topic messages published while its cursors were closed."""
    message = _Restore(snapshot, on_cursors_open)
    if gate is not None:
        gate.submit(ref, message)
        return
    if activity is not None:
        activity.begin()
    ref.tell(message)


def hand_over(
    ref: pykka.ActorRef[CrewActor], messages: Sequence[Message], missed: Mapping[str, int] | None = None
) -> None:
    """Give a crew restored with ``on_cursors_open`` the topic messages kept for it (in
    publish order): each cursor catches up on those it matches and did not receive,
    once each, then the crew goes on (see ``CrewActor._handover``). ``missed``: drops
    per cursor key while it slept."""
    ref.tell(_Handover(tuple(messages), dict(missed or {})))


def timed_out_message(crew_id: CrewId, wait: PendingWait, now: datetime) -> Message:
    """The ``WaitTimedOutMessage`` (spec §9.2) of ``wait``, expired while its crew slept.
    Its id is derived from the wait id, so a restart produces the same message (and
    ``processed_messages`` recognises it)."""
    kind = wait.kind
    original = (
        kind.topic
        if isinstance(kind, OnTopic)
        else str(kind.address)
        if isinstance(kind, OnMailbox)
        else str(kind.correlation)
    )
    try:
        message_id = MessageId(wait.wait_id)
    except ValueError:
        message_id = MessageId.new()
    return Message.wait_timed_out(
        message_id=message_id,
        at=now,
        original_topic=original,
        wait_id=wait.wait_id,
        started_at=wait.started_at,
        target_crew_id=crew_id,
    )


def wait_matches(wait: PendingWait, crew_id: CrewId, message: Message) -> bool:
    """Whether ``message`` satisfies ``wait`` of crew ``crew_id`` (topic pattern, scope
    and metadata match; mailbox address; reply correlation)."""
    kind = wait.kind
    if isinstance(kind, OnTopic):
        return (
            not message.topic.startswith("_system.")
            and topic_matches(kind.topic, message.topic)
            and scope_allows(crew_id, message)
            and metadata_allows(kind.metadata_match, message)
        )
    if isinstance(kind, OnMailbox):
        return message.target_mailbox == kind.address
    return message.correlation_id == kind.correlation and message.topic == REPLY_TOPIC


def query_crew(ref: pykka.ActorRef[CrewActor], what: str, timeout: float | None = 10.0) -> Any:
    """Ask a crew for ``snapshot``, ``status`` or ``summary`` (from outside the actor)."""
    return ref.ask(_Query(what), timeout=timeout)


def _wait_timeout(forever: bool | None, timeout_ms: int | None) -> WaitTimeout:
    if forever:
        return FOREVER
    assert timeout_ms is not None
    return FiniteWaitTimeout(timeout_ms / 1000)


def _result(dto: object) -> dict[str, Any]:
    return dict(unstructure(dto))


def _error_result(exc: BaseException, field: str | None) -> dict[str, Any]:
    return _result(ToolErrorResult(ToolError(type(exc).__name__, str(exc), field)))


def _recording(cursor: Cursor, on_done: Callable[[Message | BaseException], None]) -> Callable[[Any], None]:
    """``on_done`` of a wait on ``cursor``: the message it took is recorded as handed out
    there and then (on the taker's thread), so the same message offered again before the
    crew handled the outcome (a wake's trigger) is not buffered a second time."""

    def done(outcome: Message | BaseException) -> None:
        if isinstance(outcome, Message) and not outcome.is_timeout:
            cursor.handed_out(outcome)
        on_done(outcome)

    return done


def _format_wait_result(name: str, kind: object, outcome: Message | BaseException, missed: int = 0) -> dict[str, Any]:
    if name == "send_request":
        assert isinstance(kind, OnReply)
        if isinstance(outcome, (SendTimeoutError, UnknownCorrelationError)) or (
            isinstance(outcome, Message) and outcome.is_timeout
        ):
            return _result(SendRequestResponse(kind.correlation, True, None))
        if isinstance(outcome, BaseException):
            return _error_result(outcome, None)
        return _result(SendRequestResponse(kind.correlation, False, decode_payload(outcome.payload)[0]))
    if isinstance(outcome, BaseException):
        field = _field_of(name, outcome) if isinstance(outcome, EventHubError) else None
        return _error_result(outcome, field)
    if name == "receive_message":
        if outcome.is_timeout:
            return _result(ReceiveMessageResponse(True, metadata=outcome.metadata))
        return _result(ReceiveMessageResponse(False, message=outcome))
    if outcome.is_timeout:
        return _result(WaitForEventResponse(True, metadata=outcome.metadata, missed=missed))
    return _result(WaitForEventResponse(False, message=outcome, missed=missed))


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_VOLATILE = {"id", "event_id", "message_id", "correlation_id", "original_wait_id", "wait_id"}


def _redact(value: Any) -> str:
    """A tool result for the trace, without ids minted at random (ULIDs)."""

    def scrub(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: ("…" if k in _VOLATILE and v[k] is not None else scrub(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [scrub(x) for x in v]
        return v

    return _short(json.dumps(scrub(value), sort_keys=True, default=str), 200)


def _redact_text(arguments: str) -> str:
    try:
        return _redact(json.loads(arguments))
    except ValueError:
        return _short(arguments)


def _describe(descriptor: WaitDescriptor) -> str:
    if isinstance(descriptor, WaitOnTopic):
        return f"topic {descriptor.topic}"
    if isinstance(descriptor, WaitOnMailbox):
        return f"mailbox {descriptor.address}"
    return "reply"


def _describe_message(message: Message) -> str:
    if message.is_timeout:
        return f"timed out waiting on {message.metadata.get('original_topic', '?')}"
    source = (
        f"{message.source_crew_id}/{message.source_agent_id}"
        if message.source_agent_id
        else str(message.source_crew_id)
    )
    return f"{message.topic} from {source}: {_short(message.payload.decode('utf-8', 'replace'), 80)}"
