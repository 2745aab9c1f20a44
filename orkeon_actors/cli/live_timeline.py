"""``orkeon crew run``'s live timeline: what a crew does, printed as it happens.

Two sources feed it: the crew's observer entries (messages, tool calls and results, parks,
answers, status changes: the same entries as the simulation's trace) and the runtime's
agent events (model calls with their model, duration, tokens and cost;
:mod:`orkeon_actors.model.agent_events`). Both are called on the crews' threads, so they
only queue; one printer thread writes the lines, in the order they were queued, and
flushes each one, so a reader of a pipe sees each line when it happens.

Human lines: ``t=  1.234s  crew/agent  kind  detail`` (the trace's format), with model
calls as ``model  gpt-4o-mini 1.50s 120+30 tokens $0.0020 [stop]``, an agent's failure as
``failed  model_error: ModelError: ...`` (:class:`~orkeon_actors.model.agent_events.AgentFailed`)
when it happens, and, in the end, the
tokens and cost of every model call. ``--json``: one JSON object per line, each with a
``kind``: the agent events as their wire codec writes them
(:func:`~orkeon_actors.wire.agent_events.encode_agent_event`), observer entries as
``{"kind": "trace", "entry": KIND, "t": SECONDS, "crew", "agent", "detail"}``, and
``run_started``, ``studio`` and ``outcome`` objects around them.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TextIO

import attrs

from orkeon_actors.model.agent_events import (
    AgentEvent,
    AgentEventJournal,
    AgentFailed,
    ModelCallFinished,
    ToolCallFinished,
)
from orkeon_actors.sim.trace import TraceEvent
from orkeon_actors.wire.agent_events import encode_agent_event

__all__ = ["LiveTimeline"]

_STOP: Final = object()


@attrs.frozen
class _Entry:
    t: float
    crew: str
    agent: str | None
    kind: str
    detail: str


@attrs.frozen
class _Seen:
    t: float
    event: AgentEvent


@attrs.define
class _Totals:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


class LiveTimeline:
    """The printer: a crew observer (:meth:`record`) and an agent event subscriber
    (:meth:`follow`) writing to ``out`` from its own thread. ``emit`` writes a line at
    once (after the lines queued before it); :meth:`close` writes what is queued and
    stops the thread."""

    def __init__(
        self, out: TextIO | None = None, *, as_json: bool = False, now: Callable[[], float] | None = None
    ) -> None:
        self.as_json = as_json
        self._out = out if out is not None else sys.stdout
        started = time.monotonic()
        self._now = now if now is not None else (lambda: time.monotonic() - started)
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._totals = _Totals()
        self._unsubscribe: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._print_lines, name="orkeon-crew-timeline", daemon=True)
        self._thread.start()

    # -- the two sources (called on the crews' threads: queue only) ----------------------

    def record(self, crew_id: str, agent_id: str | None, kind: str, detail: str) -> None:
        """A crew observer entry (:class:`~orkeon_actors.crew.delivery.CrewObserver`)."""
        self._queue.put(_Entry(round(self._now(), 6), crew_id, agent_id, kind, detail))

    def follow(self, journal: AgentEventJournal) -> None:
        """Print ``journal``'s events from now on (the run's runtime is new: it has none yet)."""
        put, now = self._queue.put, self._now
        _, unsubscribe = journal.subscribe(lambda event: put(_Seen(round(now(), 6), event)))
        self._unsubscribe.append(unsubscribe)

    # -- direct output ------------------------------------------------------------------

    def emit(self, text: str, **fields: Any) -> None:
        """A line of the run itself: ``text`` for a person, ``fields`` (with a ``kind``) in JSON."""
        self._queue.put(json.dumps(fields) if self.as_json else text)

    def totals(self) -> str | None:
        """The model calls' tokens and cost so far, or ``None`` before any call."""
        totals = self._totals
        if totals.calls == 0:
            return None
        return (
            f"{totals.calls} model call{'s' if totals.calls != 1 else ''}, {totals.input_tokens} input + "
            f"{totals.output_tokens} output tokens, cost ${totals.cost:.4f}"
        )

    def close(self) -> None:
        """Stop following, write every queued line, stop the printer thread."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()

    def __enter__(self) -> LiveTimeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the printer thread --------------------------------------------------------------

    def _print_lines(self) -> None:
        reader_gone = False
        while (item := self._queue.get()) is not _STOP:
            line = self._line(item)
            if line is None or reader_gone:
                continue
            try:
                self._out.write(line + "\n")
                self._out.flush()
            except BrokenPipeError:  # `orkeon crew run | head`: the crew runs on, unread
                reader_gone = True
                _silence(self._out)

    def _line(self, item: object) -> str | None:
        if isinstance(item, str):
            return item
        if isinstance(item, _Entry):
            if self.as_json:
                fields = {"kind": "trace", "entry": item.kind, "t": item.t, "crew": item.crew, "agent": item.agent}
                return json.dumps({**fields, "detail": item.detail})
            return _trace_line(item.t, item.crew, item.agent, item.kind, item.detail)
        assert isinstance(item, _Seen)
        t, event = item.t, item.event
        if isinstance(event, ModelCallFinished):
            self._count(event)
        if self.as_json:
            return json.dumps(encode_agent_event(event))
        return _event_line(t, event)

    def _count(self, event: ModelCallFinished) -> None:
        totals = self._totals
        totals.calls += 1
        totals.input_tokens += event.input_tokens
        totals.output_tokens += event.output_tokens
        totals.cost += event.cost


def _event_line(t: float, event: AgentEvent) -> str | None:
    """A model call when it finishes; an agent's failure (its reason, the tool call in
    progress, the error); a tool call only when replayed (the trace's ``tool_call`` /
    ``tool_result`` entries show each tool call with its arguments)."""
    if isinstance(event, ModelCallFinished):
        answered_by = event.response_model or event.model
        detail = (
            f"{answered_by} {event.duration_s:.2f}s {event.input_tokens}+{event.output_tokens} tokens ${event.cost:.4f}"
        )
        if event.finish_reasons:
            detail += f" [{', '.join(event.finish_reasons)}]"
        if event.tool_calls:
            detail += f" -> {', '.join(event.tool_calls)}"
        if event.error is not None:
            detail += f" failed: {event.error}"
        return _trace_line(t, event.crew_id, event.agent_id, "model", detail)
    if isinstance(event, AgentFailed):
        where = f" in {event.tool}" if event.tool is not None else ""
        return _trace_line(t, event.crew_id, event.agent_id, "failed", f"{event.reason}{where}: {event.error}")
    if isinstance(event, ToolCallFinished) and event.replayed:
        return _trace_line(t, event.crew_id, event.agent_id, "tool_replay", f"{event.name} (recorded result)")
    return None  # a started call shows when it finishes; tool calls show as trace entries


def _silence(out: TextIO) -> None:
    """Point ``out``'s file descriptor at the null device, as Python's documentation
    advises after a ``BrokenPipeError`` on stdout, so later writes and the final flush
    do not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, out.fileno())
    os.close(devnull)


def _trace_line(t: float, crew: str, agent: str | None, kind: str, detail: str) -> str:
    return TraceEvent(t, crew, 0, agent, kind, detail).line()
