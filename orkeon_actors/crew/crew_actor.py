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

This module is the actor: its shared state, its message dispatch, its hooks and the
turns others call (``begin``, ``complete``, ``fail``, the orchestration API, the agent
loop and its tools, ``snapshot``). Cohesive groups of turns live beside it
as plain functions taking the actor explicitly, run only in its turns (they import it
for typing only, and one another one way): mail to idle agents, ``crew://`` and event
bindings (:mod:`~orkeon_actors.crew.mail_routing`); parked waits, their outcomes and
their re-arming after a wake (:mod:`~orkeon_actors.crew.parked_waits`, which uses
mail_routing); going to sleep and waking up (:mod:`~orkeon_actors.crew.sleep_wake`);
completing, failing and closing (:mod:`~orkeon_actors.crew.finishing`).
What it is built from: the agent loop (:mod:`~orkeon_actors.crew.agent_step`), one
agent's live side (:mod:`~orkeon_actors.crew.agent_runtime`), waiting calls
(:mod:`~orkeon_actors.crew.waiting_call`, :mod:`~orkeon_actors.crew.waits`), the
lifecycle's messages (:mod:`~orkeon_actors.crew.protocol`,
:mod:`~orkeon_actors.crew.handover`), its own messages
(:mod:`~orkeon_actors.crew.delivery`) and its trace texts.

It is still over 600 lines (about 800: the model-call and tool-call hooks a subclass
overrides live here, and the dispatch of the I/O loop's outcomes; the calls themselves
are in :mod:`~orkeon_actors.crew.model_calls` and :mod:`~orkeon_actors.crew.tool_calls`):
the agent loop and its tools (``run_agent`` and the tool turns, about 120 lines) are
the next group to move, and moving them needs
``run_agent`` kept as a hand-off on the actor, since parked waits resume an agent
through it and starting a wait tool parks one (an import cycle otherwise).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar, Final

import attrs
import pykka
from loguru import logger

from orkeon_actors.actors import PooledActor
from orkeon_actors.crew import (
    agent_step,
    call_events,
    finishing,
    mail_routing,
    model_calls,
    parked_waits,
    replay_keys,
    sleep_wake,
    tool_calls,
    waiting_call,
)
from orkeon_actors.crew.agent import Agent, agents_by_id
from orkeon_actors.crew.agent_io import agent_io_of
from orkeon_actors.crew.agent_runtime import AgentRuntime
from orkeon_actors.crew.delivery import (
    Activity,
    Bound,
    CrewObserver,
    DeliveryGate,
    EventBinding,
    Mail,
    Query,
    Start,
    WaitDone,
    WaitTeller,
    hand_over,
    query_crew,
    restore_crew,
    start_crew,
)
from orkeon_actors.crew.finished import Unwatch, WatchFinish
from orkeon_actors.crew.handover import CursorFilter
from orkeon_actors.crew.mode import PARKED, Orchestration, OrchestrationError
from orkeon_actors.crew.mode_state import OrchestrationState
from orkeon_actors.crew.model import ModelRequest, ModelResponse, ToolCall
from orkeon_actors.crew.protocol import (
    CatchUp,
    Closed,
    CloseMailboxes,
    CursorsOpen,
    Deliver,
    End,
    Passivate,
    Release,
    Restore,
    Resume,
    Supervision,
)
from orkeon_actors.crew.sleep_wake import EMPTY_SET
from orkeon_actors.crew.snapshot import CrewOutcome, CrewSnapshot
from orkeon_actors.crew.state import (
    AgentState,
    AgentStatus,
    BudgetSnapshot,
    CrewFailure,
    CrewStatus,
    MailboxContent,
    PendingToolCall,
    TaskAssignment,
)
from orkeon_actors.crew.trace_format import describe_message, redact, redact_arguments, short
from orkeon_actors.crew.waits import timed_out_message, wait_matches
from orkeon_actors.errors import (
    CancelledError,
    EventHubError,
    ToolValidationError,
)
from orkeon_actors.hub.async_wait import (
    AsyncWait,
    PushSubscription,
)
from orkeon_actors.hub.client import HubClient
from orkeon_actors.hub.port import EventHub, MailboxRegistration
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.tools import (
    EventHubTools,
)
from orkeon_actors.tools.converter import unstructure
from orkeon_actors.tools.waiting import (
    WAITING_TOOLS,
    error_result,
    refused_result,
)

__all__ = [
    "CrewActor",
    "CrewObserver",
    "DeliveryGate",
    "EventBinding",
    "Activity",
    "hand_over",
    "query_crew",
    "restore_crew",
    "start_crew",
    "timed_out_message",
    "wait_matches",
]

_TASK_MESSAGE_FIELDS: Final = ("topic", "source_crew_id", "source_agent_id", "correlation_id", "payload")
"""The fields of a message a crew's default ``on_message`` task shows the agent."""


@functools.cache
def _hub_tool_definitions() -> tuple[Mapping[str, Any], ...]:
    """The hub's seven tool definitions, decoded once and shared by every model request
    (``ModelRequest.tools`` holds read-only mappings: a model renders them, never edits
    them; decoding a fresh copy per call was a tenth of a one-call crew's CPU)."""
    return tuple(EventHubTools.definitions())


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
    * :meth:`on_crew_failed` sees the crew fail (``on_failure`` stays pykka's own hook);
    * :meth:`on_model_call` / :meth:`on_model_answer` see each model call start and end
      (an async model's answer arrives in a later turn), :meth:`on_tool_result` each
      tool call with its result.
    """

    # The crew's own fields in slots (pykka.Actor's stay in its __dict__, and so do a
    # subclass's): ~40 attributes would make that dict a 1.6 KB unshared table.
    __slots__ = (
        "_closing",
        "_held",
        "_passivated",
        "activity",
        "address",
        "agent_io",
        "awaiting_handover",
        "bindings",
        "call_queue",
        "client",
        "crew_id",
        "crew_name",
        "crew_pump",
        "crew_pump_token",
        "crew_registration",
        "cursors_open_to",
        "deferred",
        "definitions",
        "durable_cursors",
        "failure",
        "finish_watches",
        "gate",
        "hub",
        "idle_timeout_seconds",
        "links_declared",
        "max_concurrent_calls",
        "observer",
        "on_activity",
        "on_checkpoint",
        "on_cursor",
        "orchestration",
        "orchestrator",
        "release_order",
        "result",
        "runtimes",
        "snapshot_held",
        "status",
        "subscriptions",
        "unname",
    )

    name: ClassVar[str] = "crew"
    idle_timeout: ClassVar[float | None] = None
    start_on_first_message: ClassVar[bool] = True  # a crew is always told to begin or restore
    links: ClassVar[tuple[Any, ...] | None] = None  # None: never declared (ACL permissive default)
    concurrent_calls: ClassVar[int | None] = None
    """Default of ``max_concurrent_calls`` for a subclass (``None``: unbounded)."""

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
        on_cursor: Callable[[CrewId, CursorFilter], None] | None = None,
        max_concurrent_calls: int | None = None,
        on_checkpoint: Callable[[CrewId], None] | None = None,
    ) -> None:
        super().__init__()
        self.hub = hub
        self.agent_io = agent_io_of(hub)
        """The runtime's I/O loop (model calls) and agent event journal."""
        bound = max_concurrent_calls if max_concurrent_calls is not None else type(self).concurrent_calls
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
            raise ValueError(f"max_concurrent_calls must be a positive int or None, got {bound!r}")
        self.max_concurrent_calls: int | None = bound
        """At most this many of the crew's model calls in flight; more queue (in order)."""
        self.call_queue: tuple[AgentId, ...] = ()
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
        # Tuples, rarely replaced: an empty one is shared (an empty list is 56 B per crew).
        self.bindings: tuple[EventBinding, ...] = tuple(bindings)
        self.observer = observer
        self.activity = activity
        self.gate = gate
        self.client: HubClient = hub.bind(self.crew_id)
        self.address = MailboxAddress.crew(self.crew_id)
        self.runtimes: dict[AgentId, AgentRuntime] = {}
        self.crew_registration: MailboxRegistration | None = None
        self.unname: Callable[[], None] = lambda: None
        """Withdraws the crew's name from the hub (told while its mailboxes are live)."""
        self.crew_pump: AsyncWait | None = None
        self.crew_pump_token: WaitTeller | None = None
        self.subscriptions: tuple[PushSubscription, ...] = ()
        self.deferred: tuple[Callable[[], None], ...] = ()
        self.on_activity = on_activity
        self.on_cursor = on_cursor
        self.on_checkpoint = on_checkpoint
        """Asks for a checkpoint of the running crew (the supervisor's), before its
        agents' hub side-effect tool calls run (:mod:`~orkeon_actors.crew.replay_keys`)."""
        self.durable_cursors: frozenset[CursorFilter] = EMPTY_SET
        """The cursor keys its last snapshot holds, or already told to ``on_cursor``."""
        self._passivated = False
        self.release_order: Release | None = None
        """The :class:`Release` being carried out (its report is told by ``on_stop``)."""
        self._closing: tuple[Supervision, CrewOutcome] | None = None
        """Where the finished crew's outcome is reported once it stopped (see :class:`CloseMailboxes`)."""
        self.snapshot_held: frozenset[MessageId] = EMPTY_SET
        """Ids the cursors held when the last sleep snapshot was taken."""
        self.awaiting_handover = False
        self.cursors_open_to: Supervision | None = None
        """Told :class:`CursorsOpen` once the restore's activity was reported (so the
        catch-up, and the activity after it, come later)."""
        self._held: list[Any] | None = None
        """Actor messages received while awaiting the handover, replayed after it."""
        self.finish_watches: tuple[WatchFinish, ...] = ()
        """Told the outcome as the crew finishes (``orkeon_actors.crew.wait_finished``)."""

    # -- public API (call through the actor ref) ---------------------------------------

    def on_event(self, topic: str, deliver_to: MailboxAddress | str) -> EventBinding:
        """Bind ``topic`` (a pattern) to a mailbox of this crew: every matching message
        is delivered there (spec §13.2, dispatched). Call before or after start."""
        binding = EventBinding(topic, MailboxAddress.parse(deliver_to))
        if binding.deliver_to.crew_id != self.crew_id:
            raise ValueError(
                f"on_event delivers only to mailboxes of this crew ({self.crew_id}), not {binding.deliver_to}"
            )
        self.bindings = (*self.bindings, binding)
        if self.status is not CrewStatus.CREATED:
            mail_routing.subscribe(self, binding)
        return binding

    # -- hooks -------------------------------------------------------------------------

    def route(self, message: Message) -> AgentId:
        """The agent that receives mail sent to ``crew://{id}``: the ``agent`` metadata
        entry when it names one of the crew's agents, else the first agent."""
        wanted = message.metadata.get("agent")
        if wanted is not None and wanted in self.runtimes:
            return AgentId(wanted)
        return next(iter(self.runtimes))

    def on_message(self, agent_id: AgentId, message: Message) -> None:
        """Mail reached idle ``agent_id`` and the orchestration did not consume it. By
        default the message becomes the agent's next task."""
        envelope = unstructure(message)  # the tool JSON a model reads (orkeon_actors.wire.tool_json)
        prompt = json.dumps({"message": {name: envelope[name] for name in _TASK_MESSAGE_FIELDS}}, sort_keys=True)
        self.assign(agent_id, f"message:{message.id}", prompt, origin="message")

    def on_task_result(self, agent_id: AgentId, task: TaskAssignment, output: str) -> None:
        """Every answered task (after the orchestration saw it). Default: nothing."""
        return None

    def on_model_call(self, agent_id: AgentId, request: ModelRequest) -> None:
        """``agent_id`` asks its model ``request`` (before the call starts). Default: nothing."""
        return None

    def on_model_answer(self, agent_id: AgentId, request: ModelRequest, outcome: ModelResponse | BaseException) -> None:
        """``agent_id``'s model call of ``request`` ended with ``outcome`` (its response,
        or the error that fails the agent; not called for a call withdrawn because the
        agent was cancelled or the crew stopped). Default: nothing."""
        return None

    def on_tool_result(self, agent_id: AgentId, call: ToolCall, result: Mapping[str, Any]) -> None:
        """``agent_id``'s tool call ``call`` answered ``result`` (the JSON the model
        reads; for a parked call, when it resolves). Default: nothing."""
        return None

    def on_crew_failed(self, failure: CrewFailure) -> None:
        """The crew just failed. Default: log it."""
        logger.warning("crew {} ({}) failed: {}", self.crew_id, self.crew_name, failure)

    # -- pykka -------------------------------------------------------------------------

    def on_start(self) -> None:
        for agent in self.definitions.values():
            self.runtimes[agent.agent_id] = AgentRuntime(agent, self.hub, self.crew_id)

    def on_stop(self) -> None:
        for runtime in self.runtimes.values():
            if not self._passivated and runtime.state.status in (AgentStatus.RUNNING, AgentStatus.WAITING):
                self._agent_ended(runtime, CancelledError("the crew was stopped while the agent worked"))
            runtime.withdraw_call()  # a stopped crew's calls in flight are cancelled
        watches, self.finish_watches = self.finish_watches, ()
        for watch in watches:  # stopped unfinished (a finished crew told them already)
            finishing.tell_watch(self, watch, None)
        if self._passivated:
            sleep_wake.park_mailboxes(self)
            return
        try:
            finishing.release_mailboxes(self)
        finally:  # the supervisor forgets the crew only on this report: send it even if the close failed
            closing, self._closing = self._closing, None
            if closing is not None:
                supervision, outcome = closing
                supervision.tell(Closed(self.crew_id, outcome))

    def on_receive(self, message: Any) -> Any:
        try:
            return self._dispatch(message)
        finally:
            if self.activity is not None and not isinstance(message, (Query, WatchFinish, Unwatch)):
                self.activity.end()

    def _dispatch(self, message: Any) -> Any:
        if isinstance(message, Query):
            return self._query(message.what)
        if isinstance(message, WatchFinish):
            return finishing.watch_finish(self, message)
        if isinstance(message, Unwatch):
            if message.watch in self.finish_watches:
                watches = list(self.finish_watches)
                watches.remove(message.watch)
                self.finish_watches = tuple(watches)
            return None
        if isinstance(message, Passivate):
            sleep_wake.passivate(self, message)
            return None
        if isinstance(message, Release):
            self._passivated = True
            self.release_order = message  # reported by on_stop, once the mailboxes are parked
            self.actor_ref.stop(block=False)
            return None
        if isinstance(message, CloseMailboxes):
            if self.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
                final = finishing.final_json(self) if message.keep_final else None
                self._closing = (message.supervision, CrewOutcome(self.status, self.result, self.failure, final))
                self.actor_ref.stop(block=False)  # on_stop releases and reports
            return None
        if self.awaiting_handover:
            if not isinstance(message, CatchUp):
                if self._held is None:
                    self._held = []
                self._held.append(message)  # replayed in order once the cursors caught up
                if self.activity is not None:
                    self.activity.begin()  # it stays in flight until replayed
                return None
            self.awaiting_handover = False
        if self.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            finishing.after_finish(self, message)
            return None
        try:
            if isinstance(message, Start):
                self._begin()
            elif isinstance(message, WaitDone):
                parked_waits.wait_done(self, message)
            elif isinstance(message, model_calls.ModelDone):
                model_calls.model_done(self, message)
            elif isinstance(message, tool_calls.ToolDone):
                tool_calls.tool_done(self, message)
            elif isinstance(message, Mail):
                mail_routing.mail_arrived(self, message)
            elif isinstance(message, Bound):
                mail_routing.bound_event(self, message)
            elif isinstance(message, Restore):
                sleep_wake.restore(self, message.snapshot, message.supervision)
            elif isinstance(message, Deliver):
                parked_waits.deliver(self, message.message)
            elif isinstance(message, CatchUp):
                sleep_wake.handover(self, message.messages, message.missed)
            elif isinstance(message, Resume):
                parked_waits.rearm_all(self)
            elif isinstance(message, End):
                self.fail(message.error_type, message.reason)
            while self.deferred and self.status not in (CrewStatus.COMPLETED, CrewStatus.FAILED):
                action, self.deferred = self.deferred[0], self.deferred[1:]
                action()
        except Exception as exc:  # supervision: a crew failure is recorded, never lost
            logger.opt(exception=True).debug("crew {} failed", self.crew_id)
            self.fail(type(exc).__name__, str(exc) or repr(exc))
        if self.status not in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            busy = any(rt.busy for rt in self.runtimes.values())
            # Waking (its cursors catching up, its waits not re-armed yet) is not waiting.
            self.set_status(CrewStatus.RUNNING if busy or self.awaiting_handover else CrewStatus.WAITING)
        if self.on_activity is not None:
            self.on_activity(self.crew_id, self.status)
        supervision, self.cursors_open_to = self.cursors_open_to, None
        if supervision is not None:
            supervision.tell(CursorsOpen(self.crew_id))
        if isinstance(message, CatchUp):
            held, self._held = self._held or (), None
            for later in held:  # what arrived while the cursors caught up, in order
                try:
                    self._dispatch(later)
                finally:
                    if self.activity is not None:
                        self.activity.end()
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
        self.set_status(CrewStatus.RUNNING)
        self.register_mailboxes()
        for binding in self.bindings:
            mail_routing.subscribe(self, binding)
        mail_routing.arm_crew_pump(self)
        self.trace(None, "crew", f"started mode={self.orchestrator.mode} agents={','.join(self.runtimes)}")
        self.orchestrator.start(self)
        for agent_id, runtime in self.runtimes.items():
            if runtime.state.status is AgentStatus.IDLE:
                mail_routing.arm_pump(self, agent_id)

    def register_mailboxes(self) -> None:
        """The crew's mailbox and every agent's, in one call (one store round trip on
        the durable hub; each reloads what was kept for it)."""
        runtimes = list(self.runtimes.values())
        self.unname()
        self.unname = self.hub.name_crew(self.crew_id, self.crew_name)  # display only (sent rows)
        # Waits for the durable registration's commit. Not waiting (registrations_unwaited)
        # saved a pool thread per starting crew but lost a bound event published right
        # after the crew reported WAITING, in 4-6 runs of 10.
        crew, *agents = self.hub.register_mailboxes([self.address, *(rt.address for rt in runtimes)])
        self.crew_registration = crew
        for runtime, registration in zip(runtimes, agents, strict=True):
            runtime.registration = registration

    # -- sleep and wake (orkeon_actors.lifecycle) ----------------------------------------

    # -- finishing (crew/finishing.py) -------------------------------------------------

    def complete(self, result: str) -> None:
        """The orchestration finished: record ``result``, release waits and mailboxes."""
        finishing.complete(self, result)

    def fail(self, error_type: str, message: str, agent_id: AgentId | None = None) -> None:
        """Mark the crew failed with its cause (idempotent: the first cause wins)."""
        finishing.fail(self, error_type, message, agent_id)

    def set_status(self, status: CrewStatus) -> None:
        """Set the crew's :class:`CrewStatus` (unchanged if it already is)."""
        if status is not self.status:
            self.status = status

    # -- orchestration API ---------------------------------------------------------------

    def set_orchestration(self, state: OrchestrationState, reason: str) -> None:
        """Replace the orchestration state (a transition, recorded in the trace)."""
        self.orchestration = state
        self.trace(None, "transition", reason)
        if self.on_activity is not None:
            self.on_activity(self.crew_id, self.status)

    def agent_state(self, agent_id: AgentId) -> AgentState:
        return self.runtimes[agent_id].state

    def assign(self, agent_id: AgentId | str, task_id: str, prompt: str, *, origin: str = "orchestration") -> None:
        """Give ``agent_id`` a task: the prompt is appended to its conversation and its
        loop runs until it answers or parks. The agent must be idle."""
        runtime = self.runtimes[AgentId(agent_id)]
        if runtime.state.status not in (AgentStatus.IDLE, AgentStatus.DONE):
            raise OrchestrationError(
                f"agent {agent_id} is busy ({runtime.state.status.value}); cannot assign {task_id}"
            )
        if runtime.pump is not None:
            runtime.pump.cancel()
            runtime.pump = None
        runtime.state = agent_step.begin_task(runtime.state, runtime.agent, TaskAssignment(task_id, prompt, origin))
        self.trace(runtime.agent.agent_id, "task", f"{task_id}: {short(prompt)}")
        self.run_agent(runtime)

    def cancel_agent(self, agent_id: AgentId) -> None:
        """Stop ``agent_id``'s current task (its wait is withdrawn); it becomes idle."""
        runtime = self.runtimes[agent_id]
        if runtime.wait is not None:
            runtime.wait.cancel()
            runtime.wait = None
        if runtime.withdraw_call():
            self.defer(lambda: model_calls.start_queued(self))  # its slot is free
        if runtime.state.status in (AgentStatus.RUNNING, AgentStatus.WAITING):
            self._agent_ended(runtime, CancelledError("the orchestration withdrew the agent's task"))
            runtime.state = attrs.evolve(
                runtime.state, status=AgentStatus.IDLE, task=None, pending=None, queued_calls=()
            )
            self.trace(agent_id, "agent", "cancelled")

    def add_agent(self, agent: Agent) -> None:
        """Add an agent while running (autonomous spawning): its mailbox is registered."""
        if agent.agent_id in self.runtimes:
            raise OrchestrationError(f"an agent {agent.agent_id!r} already exists in crew {self.crew_id}")
        self.definitions[agent.agent_id] = agent
        runtime = AgentRuntime(agent, self.hub, self.crew_id)
        runtime.registration = self.hub.register_mailbox(runtime.address)
        self.runtimes[agent.agent_id] = runtime
        self.trace(agent.agent_id, "agent", f"spawned role={agent.role}")

    def resume_with(self, agent_id: AgentId, call_id: str, result: Mapping[str, Any]) -> None:
        """Inject ``result`` as the answer of ``agent_id``'s parked call ``call_id``
        (delegations) and let the agent go on."""
        runtime = self.runtimes[agent_id]
        pending = runtime.state.pending
        if pending is None or pending.call.id != call_id:
            raise OrchestrationError(f"agent {agent_id} is not parked on call {call_id}")
        parked_waits.inject(self, runtime, pending.call, dict(result))

    def defer(self, action: Callable[[], None]) -> None:
        """Run ``action`` on this crew's thread once the current step is over (a mode
        starting work from inside a tool call, before the caller parked)."""
        self.deferred = (*self.deferred, action)

    def agent_ids(self) -> list[AgentId]:
        return list(self.runtimes)

    def trace(self, agent_id: str | None, kind: str, detail: str) -> None:
        if self.observer is not None:
            self.observer.record(str(self.crew_id), None if agent_id is None else str(agent_id), kind, detail)

    # -- the agent loop ----------------------------------------------------------------

    def run_agent(self, runtime: AgentRuntime, response: ModelResponse | None = None) -> None:
        """Drive ``runtime`` until it answers its task, parks (on a hub wait or a model
        call in flight), or fails (the agent step,
        :func:`~orkeon_actors.crew.agent_step.run`; the hooks an answer runs fail the
        agent too). ``response``: the answer of the model call it was parked on."""
        try:
            with call_events.crew_scope(self.agent_io.journal, str(self.crew_id)):  # the crew's trace
                outcome = agent_step.run(
                    runtime,
                    crew_id=str(self.crew_id),
                    clock=self.hub.clock,
                    tools=lambda: self._tool_definitions(runtime),
                    run_tool=lambda call: self._run_tool(runtime, call),
                    on_tool_result=lambda call, result: self._traced_result(runtime, call, result),
                    ask=lambda request: model_calls.ask(self, runtime, request),
                    response=response,
                    hold=lambda: replay_keys.hold(self, runtime),
                )
                if isinstance(outcome, agent_step.Answered):
                    self._finish_task(runtime, outcome.text)
        except Exception as exc:
            self.agent_failed(runtime, exc)

    def _finish_task(self, runtime: AgentRuntime, output: str) -> None:
        task = runtime.state.task
        runtime.state = agent_step.answered(runtime.state, self.budget_snapshot(runtime))
        agent_id = runtime.agent.agent_id
        call_events.answered(self.agent_io.journal, self.hub.clock, str(self.crew_id), str(agent_id), output)
        self.trace(agent_id, "answer", short(output))
        if task is not None and task.origin == "orchestration":
            self.orchestrator.on_task_done(self, agent_id, task.task_id, output)
        if task is not None:
            self.on_task_result(agent_id, task, output)
        if self.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
            return
        if runtime.state.status is AgentStatus.IDLE:
            mail_routing.serve_inbox_or_pump(self, agent_id)

    def agent_failed(self, runtime: AgentRuntime, exc: BaseException) -> None:
        """``runtime``'s agent failed with ``exc``: its wait is withdrawn and the crew fails."""
        self._agent_ended(runtime, exc)
        runtime.state = agent_step.failed(runtime.state, exc, self.budget_snapshot(runtime))
        if runtime.wait is not None:
            runtime.wait.cancel()
            runtime.wait = None
        runtime.withdraw_call()
        self.trace(runtime.agent.agent_id, "agent", f"failed {runtime.state.failure}")
        self.fail(type(exc).__name__, str(exc), runtime.agent.agent_id)

    def _agent_ended(self, runtime: AgentRuntime, exc: BaseException) -> None:
        """Record that ``runtime``'s task ended without an answer (``AgentFailed``)."""
        deadline = runtime.budget.token.deadline
        tool = runtime.tool_call.tool_name if runtime.tool_call is not None else None
        call_events.agent_failed(
            self.agent_io.journal,
            self.hub.clock,
            str(self.crew_id),
            str(runtime.agent.agent_id),
            exc,
            deadline_passed=deadline is not None and self.hub.clock.monotonic() >= deadline,
            tool=tool,
        )

    def budget_snapshot(self, runtime: AgentRuntime) -> BudgetSnapshot:
        """The budget ``runtime`` has used so far, as data."""
        return agent_step.budget_snapshot(runtime.state, runtime.budget, self.hub.clock)

    def _tool_definitions(self, runtime: AgentRuntime) -> list[Mapping[str, Any]]:
        defs: list[Mapping[str, Any]] = []
        if runtime.agent.hub_tools:
            defs.extend(_hub_tool_definitions())
        defs.extend(t.definition() for t in runtime.agent.tools)
        defs.extend(self.orchestrator.tool_definitions(runtime.agent.agent_id))
        return defs

    def append_tool_result(self, runtime: AgentRuntime, call: ToolCall, result: Mapping[str, Any]) -> None:
        """Append ``call``'s ``result`` to ``runtime``'s conversation (traced)."""
        runtime.state = agent_step.with_tool_result(runtime.state, call, result)
        self._traced_result(runtime, call, result)

    def _traced_result(self, runtime: AgentRuntime, call: ToolCall, result: Mapping[str, Any]) -> None:
        self.on_tool_result(runtime.agent.agent_id, call, result)
        started, runtime.tool_call = runtime.tool_call, None
        journal = self.agent_io.journal
        if started is None or not started.started(call):  # answered after a restore: started now
            agent_id = str(runtime.agent.agent_id)
            started = call_events.tool_started(journal, self.hub.clock, str(self.crew_id), agent_id, call)
        call_events.tool_finished(journal, self.hub.clock, started, result)
        if self.observer is not None:  # the text is built only for an observer (redact walks the result)
            self.trace(runtime.agent.agent_id, "tool_result", f"{call.name} -> {redact(result)}")

    # -- tools -------------------------------------------------------------------------

    def _run_tool(self, runtime: AgentRuntime, call: ToolCall) -> Any:
        agent = runtime.agent
        runtime.tool_call = call_events.tool_started(
            self.agent_io.journal, self.hub.clock, str(self.crew_id), str(agent.agent_id), call
        )
        if self.observer is not None:
            self.trace(agent.agent_id, "tool_call", f"{call.name} {redact_arguments(call.arguments)}")
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
                if inspect.iscoroutinefunction(tool.fn):  # parks while it runs on the I/O loop
                    return tool_calls.start(self, runtime, tool, call)
                return agent_step.run_user_tool(tool.fn, call)
        if agent.hub_tools and self.agent_io.keyed_tool_calls:  # a replay never sends twice
            call = replay_keys.keyed(runtime.state, call)
        if agent.hub_tools and call.name in WAITING_TOOLS:
            return self._start_wait_tool(runtime, call)
        if agent.hub_tools:
            return runtime.tools.invoke(call.name, call.arguments, errors="result")
        return error_result(ToolValidationError(f"unknown tool {call.name!r}"), None)

    def _start_wait_tool(self, runtime: AgentRuntime, call: ToolCall) -> Any:
        """Validate a waiting tool call exactly as the tool does, then answer it or park
        on a non-blocking hub wait (:mod:`~orkeon_actors.crew.waiting_call`); the result
        is formatted by the same functions when the wait resolves
        (:mod:`orkeon_actors.tools.waiting`), so the model reads the same thing as from
        ``EventHubTools.invoke``."""
        try:
            step = waiting_call.start(runtime, call)
            if isinstance(step, waiting_call.Ready):
                if step.event is not None:
                    self.trace(runtime.agent.agent_id, "message", describe_message(step.event))
                return step.result
            return parked_waits.park(self, runtime, call, step.descriptor, step.timeout, step.cursor)
        except agent_step.FATAL:
            raise
        except (EventHubError, ValueError) as exc:
            return refused_result(call.name, exc)

    # -- snapshot ----------------------------------------------------------------------

    def snapshot(self) -> CrewSnapshot:
        """The crew as data (spec §8.1). Pending waits are the parked agents' waits;
        ``mailboxes`` holds the messages the crew took for busy agents (their inboxes)."""
        agents = tuple(rt.state_with_cursors() for rt in self.runtimes.values())
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
