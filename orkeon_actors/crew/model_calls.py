"""An agent asking its model: inline, or parked while the call runs on the runtime's
I/O loop (Orkeon EventHub & Crew Lifecycle specification, §8, §9.4; ``docs/crews.md``,
"The agent loop").

Plain functions of :class:`~orkeon_actors.crew.crew_actor.CrewActor`'s state, called
only in its turns, the actor passed explicitly (as :mod:`~orkeon_actors.crew.parked_waits`
does for hub waits).

Guarantees:

* a model whose ``complete`` is a plain function (:func:`~orkeon_actors.crew.agent_io.call_kind`
  ``inline``) runs on the crew's thread, as before: a simulation is unchanged;
* an ``async`` or ``blocking`` model's call runs on the I/O loop; the agent stays
  ``RUNNING`` (so its crew does not sleep) but the crew's turn ends, and its other
  agents and its mail are served meanwhile;
* the call's outcome comes back as a :class:`ModelDone` actor message; the loop's
  thread never touches the crew's state. An outcome whose token is not the agent's live
  call's (the call was withdrawn: the agent was cancelled, failed, or the crew stopped)
  is ignored;
* withdrawing a call cancels its asyncio task, so an SDK aborts its HTTP request;
* each call is recorded in the runtime's journal (:mod:`~orkeon_actors.crew.call_events`),
  started then finished, from the thread that ran it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import attrs

from orkeon_actors.crew import call_events
from orkeon_actors.crew.agent_io import call_kind
from orkeon_actors.crew.agent_runtime import AgentRuntime, CallInFlight
from orkeon_actors.crew.mode import PARKED
from orkeon_actors.crew.model import AsyncModel, Model, ModelRequest, ModelResponse
from orkeon_actors.errors import ModelError
from orkeon_actors.hub.memory import HubCore
from orkeon_actors.model.ids import AgentId

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = ["ModelDone", "ask", "checked", "in_flight", "model_done", "start", "start_queued", "watch_budget"]


@attrs.frozen(eq=False)
class ModelDone:
    """The outcome of ``agent_id``'s model call ``token``: its response or its error."""

    agent_id: AgentId
    token: object
    outcome: ModelResponse | BaseException


def checked(model: Any, response: object) -> ModelResponse:
    """``response`` if it is a ``ModelResponse``, else the ``ModelError`` saying so."""
    if isinstance(response, ModelResponse):
        return response
    name, provider = call_events.model_identity(model)
    raise ModelError(
        f"model {name!r} returned {type(response).__name__}, not a ModelResponse: its complete must return one "
        "(an async complete is declared with async def)",
        provider=provider,
        model=name,
    )


def ask(actor: CrewActor, runtime: AgentRuntime, request: ModelRequest) -> ModelResponse | Any:
    """Ask ``runtime``'s model ``request``: its response (an inline model), or ``PARKED``
    with the call running on the I/O loop (its outcome is told as :class:`ModelDone`)."""
    model = runtime.agent.model
    io, clock = actor.agent_io, actor.hub.clock
    agent_id = runtime.agent.agent_id
    actor.on_model_call(agent_id, request)
    if call_kind(model) == "inline":
        started = call_events.model_started(io.journal, clock, model, request)
        try:
            response = checked(model, cast(Model, model).complete(request))
        except Exception as exc:
            call_events.model_finished(io.journal, clock, started, exc)
            actor.on_model_answer(agent_id, request, exc)
            raise
        call_events.model_finished(io.journal, clock, started, response)
        actor.on_model_answer(agent_id, request, response)
        return response
    limit = actor.max_concurrent_calls
    if limit is not None and in_flight(actor) >= limit:  # queued: started once a call ends
        runtime.queued_request = request
        actor.call_queue = (*actor.call_queue, runtime.agent.agent_id)
        return PARKED
    start(actor, runtime, request)
    return PARKED


def in_flight(actor: CrewActor) -> int:
    """How many of ``actor``'s agents have a model call in flight."""
    return sum(runtime.call is not None for runtime in actor.runtimes.values())


def start_queued(actor: CrewActor) -> None:
    """Start the queued calls, oldest first, while the crew's bound allows."""
    limit = actor.max_concurrent_calls
    while actor.call_queue and (limit is None or in_flight(actor) < limit):
        agent_id, actor.call_queue = actor.call_queue[0], actor.call_queue[1:]
        runtime = actor.runtimes.get(agent_id)
        if runtime is None or runtime.queued_request is None:  # withdrawn meanwhile
            continue
        request, runtime.queued_request = runtime.queued_request, None
        start(actor, runtime, request)


def start(actor: CrewActor, runtime: AgentRuntime, request: ModelRequest) -> None:
    """Run ``runtime``'s model call on the I/O loop (its outcome is told as
    :class:`ModelDone`); the budget's token firing ends it."""
    model = runtime.agent.model
    io, clock = actor.agent_io, actor.hub.clock
    kind = call_kind(model)
    started = call_events.model_started(io.journal, clock, model, request)
    token = object()
    agent_id = runtime.agent.agent_id
    if kind == "timed":
        _start_timed(actor, runtime, request, started, token)
        return
    loop = io.loop

    async def call() -> None:
        outcome: ModelResponse | BaseException
        try:
            async with io.slot():
                outcome = await run(kind)
            outcome = checked(model, outcome)
        except asyncio.CancelledError as exc:
            call_events.model_finished(io.journal, clock, started, exc)
            raise
        except Exception as exc:  # the crew fails the agent with it, on its own thread
            outcome = exc
        call_events.model_finished(io.journal, clock, started, outcome)
        actor.tell(ModelDone(agent_id, token, outcome))

    async def run(kind: str) -> ModelResponse:
        if kind == "async":
            return await cast(AsyncModel, model).complete(request)
        return await loop.run_blocking(lambda: cast(Model, model).complete(request))

    runtime.call = CallInFlight(loop.submit(call), token, request)
    watch_budget(actor, runtime, lambda error: ModelDone(agent_id, token, error))


def _start_timed(
    actor: CrewActor, runtime: AgentRuntime, request: ModelRequest, started: call_events.Started, token: object
) -> None:
    """A simulated call: answered now on the crew's thread (deterministic), the answer
    delivered ``model.latency`` seconds later by a timer on the runtime's clock (a
    virtual one in a simulation, whose seeded scheduler runs the timer)."""
    model = runtime.agent.model
    io, clock, hub = actor.agent_io, actor.hub.clock, actor.hub
    agent_id = runtime.agent.agent_id
    if not isinstance(hub, HubCore):
        raise TypeError(f"a model with a latency needs a hub built on the hub core, got {type(hub).__name__}")
    outcome: ModelResponse | BaseException
    try:
        outcome = checked(model, cast(Model, model).complete(request))
    except Exception as exc:  # delivered as the call's outcome, after the latency
        outcome = exc

    def answer() -> None:  # the timer's thread (the simulation's scheduler in a simulation)
        call_events.model_finished(io.journal, clock, started, outcome)
        actor.tell(ModelDone(agent_id, token, outcome))

    pending: concurrent.futures.Future[None] = concurrent.futures.Future()
    in_flight = runtime.call = CallInFlight(pending, token, request)
    timer = hub.scheduler.schedule_at(clock.monotonic() + float(getattr(model, "latency", 0.0)), answer)
    in_flight.cleanups.append(timer.cancel)
    watch_budget(actor, runtime, lambda error: ModelDone(agent_id, token, error))


def watch_budget(actor: CrewActor, runtime: AgentRuntime, done: Callable[[BaseException], Any]) -> None:
    """End ``runtime``'s call in flight when its budget's token fires: the crew is told
    ``done(error)`` (which fails the agent) and the task is cancelled."""
    in_flight = runtime.call
    assert in_flight is not None
    budget_token = runtime.budget.token
    future = in_flight.future

    def budget_fired(error: BaseException) -> None:  # any thread: the crew fails the agent
        actor.tell(done(error))
        future.cancel()

    in_flight.cleanups.append(budget_token.on_cancel(budget_fired))
    hub = actor.hub
    # The wall-time limit fires during the call, on the hub's timers (the runtime's clock).
    # A hub not built on the hub core has none: the limit is then checked when it answers.
    if budget_token.deadline is not None and isinstance(hub, HubCore):
        timer = hub.scheduler.schedule_at(budget_token.deadline, budget_token.fire_deadline)
        in_flight.cleanups.append(timer.cancel)


def model_done(actor: CrewActor, message: ModelDone) -> None:
    """A model call's outcome: the agent takes the response and runs on (or fails with
    the error), unless the call was withdrawn meanwhile."""
    runtime = actor.runtimes.get(message.agent_id)
    if runtime is None or runtime.call is None or runtime.call.token is not message.token:
        return
    request = runtime.call.request
    assert request is not None  # a model call's
    runtime.withdraw_call()
    outcome = message.outcome
    actor.on_model_answer(runtime.agent.agent_id, request, outcome)
    if isinstance(outcome, BaseException):
        actor.agent_failed(runtime, outcome)
    else:
        actor.run_agent(runtime, response=outcome)
    start_queued(actor)
