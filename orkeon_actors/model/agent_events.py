"""What an agent did, as events: each model call and each tool call, started and finished.

These are the values every observer of an agent reads (the Studio's agent lanes,
``orkeon crew run``'s timeline, the OpenTelemetry GenAI spans and metrics, a test). The
crew's agent loop emits them; it never waits on an observer.

:class:`AgentFailed` ends an agent's task that got no answer (the model raised, a tool
error ended it, its budget or deadline ran out, it was cancelled), with the reason.

Guarantees:

* Every value is frozen and holds only plain data (strings, numbers, JSON text), so it can
  be kept, serialised and sent to another thread as it is.
* A call has one ``call_id``, unique in its runtime, shared by its ``...Started`` and its
  ``...Finished`` event; a finished event always follows its started event in a journal.
* Times come from the runtime's :class:`~orkeon_actors.model.clock.Clock` (virtual in a
  simulation): ``started_at`` is an aware UTC datetime, ``duration_s`` the clock's
  monotonic difference.
* Content (the prompt, the answer, tool arguments and results) is set only when content
  capture was asked for (off by default, as the OpenTelemetry GenAI conventions say):
  otherwise those fields are ``None``.

:class:`AgentEventJournal` keeps the most recent events (a bounded history, so an observer
that attaches late still sees what happened before it) and hands each new event to its
subscribers on the emitting thread; a subscriber must only queue it.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Final

import attrs
from loguru import logger

__all__ = [
    "DEFAULT_JOURNAL_SIZE",
    "AgentAnswered",
    "AgentEvent",
    "AgentEventJournal",
    "AgentFailed",
    "FAILURE_REASONS",
    "ModelCallFinished",
    "ModelCallStarted",
    "ToolCallFinished",
    "ToolCallStarted",
]

DEFAULT_JOURNAL_SIZE: Final = 10_000
"""How many recent events a runtime's journal keeps by default."""


@attrs.frozen(kw_only=True)
class ModelCallStarted:
    """An agent asked its model for its next step.

    ``provider`` is the GenAI provider name (``"openai"``, ``"anthropic"``, ``"scripted"``,
    or the model class's name when it names none); ``turn`` counts the task's model calls
    from 0. ``prompt`` is the conversation sent, as JSON text, only with content capture.
    """

    seq: int = 0
    call_id: str
    crew_id: str
    agent_id: str
    turn: int
    model: str
    provider: str
    started_at: datetime
    prompt: str | None = None


@attrs.frozen(kw_only=True)
class ModelCallFinished:
    """The model answered, or the call failed (``error`` is then its type and message).

    ``response_model`` is the model the provider says answered (may differ from the one
    asked); ``finish_reasons`` the provider's (``"stop"``, ``"tool_calls"``, ...);
    ``tool_calls`` the names of the tools the model asked for, in order. Tokens and cost
    are what the provider reported, also for a call that was aborted.
    """

    seq: int = 0
    call_id: str
    crew_id: str
    agent_id: str
    turn: int
    model: str
    provider: str
    started_at: datetime
    duration_s: float
    response_model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    finish_reasons: tuple[str, ...] = ()
    tool_calls: tuple[str, ...] = ()
    error: str | None = None
    answer: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallStarted:
    """An agent called a tool (``tool_call_id`` is the model's id for the call)."""

    seq: int = 0
    call_id: str
    crew_id: str
    agent_id: str
    tool_call_id: str
    name: str
    started_at: datetime
    arguments: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallFinished:
    """A tool call's result came back (``error`` set when the result is an error result).

    ``replayed`` is true when the result was answered from the agent's record of a call it
    made before a crash rather than by running the tool again.
    """

    seq: int = 0
    call_id: str
    crew_id: str
    agent_id: str
    tool_call_id: str
    name: str
    started_at: datetime
    duration_s: float
    error: str | None = None
    replayed: bool = False
    result: str | None = None


@attrs.frozen(kw_only=True)
class AgentAnswered:
    """An agent answered its task (``text`` only with content capture)."""

    seq: int = 0
    crew_id: str
    agent_id: str
    at: datetime
    text: str | None = None


FAILURE_REASONS: Final = ("model_error", "tool_error", "budget_exhausted", "deadline", "cancelled", "error")
"""Why an agent failed (:class:`AgentFailed`'s ``reason``)."""


@attrs.frozen(kw_only=True)
class AgentFailed:
    """An agent's task ended without an answer, at ``at``.

    ``reason`` is one of :data:`FAILURE_REASONS`: ``model_error`` (its model call
    raised: a :class:`~orkeon_actors.errors.ModelError`, or whatever its model raised),
    ``tool_error`` (an error that ends the agent came out of a tool call, ``tool`` names
    it), ``budget_exhausted`` (tokens, tool calls or cost), ``deadline`` (its wall-time
    budget), ``cancelled`` (its cancel token fired, the orchestration withdrew its task,
    or its crew was stopped while it worked) or ``error`` (anything else: a hook, the
    orchestration, the hub stopping). ``error`` is the exception's type and message.
    """

    seq: int = 0
    crew_id: str
    agent_id: str
    at: datetime
    reason: str
    error: str
    tool: str | None = None


AgentEvent = ModelCallStarted | ModelCallFinished | ToolCallStarted | ToolCallFinished | AgentAnswered | AgentFailed
"""One thing an agent did."""

Subscriber = Callable[[AgentEvent], None]
CrewScope = Callable[[str], AbstractContextManager[object]]
"""What a crew enters around its agents' steps (:attr:`AgentEventJournal.crew_scope`)."""


class AgentEventJournal:
    """A runtime's record of what its agents did: the last ``size`` events, and live
    subscribers.

    :meth:`record` stamps the event with the next sequence number (``seq``, from 1, in
    recording order), keeps it, and calls each subscriber with it on the calling thread;
    a subscriber that raises is logged at WARNING and unsubscribed (the agent loop never
    fails because an observer did). :meth:`subscribe` returns the history so far
    and the function that unsubscribes, atomically, so no event is missed or seen twice.
    ``capture_content`` tells emitters whether to fill the content fields.
    ``crew_scope``, when set (by :func:`~orkeon_actors.middleware.genai.observe_agents`),
    is entered by a crew, with its id, around each step of its agents on the crew's
    thread: the OpenTelemetry observer makes it the crew's trace context there, so the
    hub's spans of the messages the agents publish join the crew's trace. ``None`` (the
    default) costs a crew one attribute read per step.
    Thread-safe.
    """

    def __init__(self, size: int = DEFAULT_JOURNAL_SIZE, *, capture_content: bool = False) -> None:
        if size < 1:
            raise ValueError(f"an agent event journal keeps at least one event, not {size}")
        self.capture_content = capture_content
        self.crew_scope: CrewScope | None = None
        self._events: deque[AgentEvent] = deque(maxlen=size)
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._call_ids = itertools.count(1)

    def next_call_id(self) -> str:
        """A call id unique in this journal (``call-1``, ``call-2``, ...)."""
        return f"call-{next(self._call_ids)}"

    def record(self, event: AgentEvent) -> AgentEvent:
        """Keep ``event`` and hand it to the subscribers; returns it stamped with its ``seq``.

        ``event`` must be a new value, recorded once: the journal sets its ``seq`` field
        (0 until then) in place."""
        with self._lock:
            # The one place an event's ``seq`` is set: on the fresh value the emitter hands
            # over, in place (an ``attrs.evolve`` copy cost three quarters of this call).
            object.__setattr__(event, "seq", next(self._seq))
            self._events.append(event)
            subscribers = tuple(self._subscribers) if self._subscribers else ()
        for subscriber in subscribers:
            try:
                subscriber(event)
            except Exception as error:  # an observer never fails the agent loop
                self._drop(subscriber, error)
        return event

    def _drop(self, subscriber: Subscriber, error: Exception) -> None:
        logger.warning("agent event subscriber {!r} raised {!r}; it is unsubscribed", subscriber, error)
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def recent(self, limit: int | None = None) -> tuple[AgentEvent, ...]:
        """The kept events, oldest first (the last ``limit`` of them when given)."""
        with self._lock:
            events = tuple(self._events)
        return events if limit is None else events[-limit:]

    def last_of(self, crew_id: str, agent_id: str) -> AgentEvent | None:
        """The most recent kept event of ``agent_id`` in ``crew_id`` (searched from the
        newest back: cheap when the agent did something lately)."""
        with self._lock:
            for event in reversed(self._events):
                if event.agent_id == agent_id and event.crew_id == crew_id:
                    return event
        return None

    def subscribe(self, subscriber: Subscriber) -> tuple[tuple[AgentEvent, ...], Callable[[], None]]:
        """Start calling ``subscriber`` with each new event; returns the kept history (the
        events before the first one ``subscriber`` gets) and the unsubscribe function."""
        with self._lock:
            history = tuple(self._events)
            self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

        return history, unsubscribe
