"""What a simulation trace means as a picture: lanes, turns, waits, messages.

Derived from :class:`~orkeon_actors.sim.trace.TraceEvent` lists alone (so a trace saved
with ``--json`` can be drawn later), and shared by every view: the text timeline's lanes,
the HTML file (:mod:`orkeon_actors.sim.html`) and the Chrome trace (:mod:`orkeon_actors.sim.chrome`).

* a *lane* is a crew (``crew``) or one of its agents (``crew/agent``): crews in order of
  first appearance, each followed by its agents in the same order;
* a *turn* of an agent runs from the event that set it working (its task, mail, or the
  result of a wait) to the one that stopped it (its answer, a park, its failure);
* a *wait* of an agent runs from a ``park`` to the event that resumed it (the message, or
  a ``tool_result`` carrying a timeout); a crew's *wait* is a stretch of
  ``waiting_for_message`` status;
* a *message* is an arrow from the lane that sent it (the sender named in the ``message``
  entry, at its latest tool call or transition before the delivery) to the lane that
  received it. Timeouts come from the clock, not from a lane.

Spans still open when the trace ends (a run stopped at ``until``) end at its last event.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from orkeon_actors.sim.trace import TraceEvent

__all__ = ["Arrow", "Span", "Spans", "lane_of", "spans"]

_SOURCE = re.compile(r" from (?P<source>[A-Za-z0-9_.:-]+(?:/[A-Za-z0-9_.:-]+)?): ")
_STARTS_TURN = ("task", "tool_result", "tool_call")
_ENDS_TURN = ("answer", "park", "agent")
_SENDS = ("tool_call", "transition", "answer", "crew")


def lane_of(event: TraceEvent) -> str:
    return f"{event.crew}/{event.agent}" if event.agent else event.crew


@attrs.frozen
class Span:
    """``kind`` is ``turn`` or ``wait``; ``start``/``end`` are virtual seconds,
    ``first``/``last`` the indices of the entries that opened and closed it."""

    lane: str
    kind: str
    start: float
    end: float
    first: int
    last: int
    label: str = ""


@attrs.frozen
class Arrow:
    source: str
    target: str
    sent: int
    received: int
    time: float
    label: str


@attrs.frozen
class Spans:
    lanes: tuple[str, ...]
    spans: tuple[Span, ...]
    arrows: tuple[Arrow, ...]
    end: float


def spans(events: Sequence[TraceEvent]) -> Spans:
    """The lanes, spans and arrows of ``events`` (in recording order)."""
    by_crew: dict[str, dict[str, None]] = {}
    for event in events:
        agents = by_crew.setdefault(event.crew, {})
        if event.agent:
            agents.setdefault(lane_of(event), None)
    lanes = {lane: None for crew, agents in by_crew.items() for lane in (crew, *agents)}
    end = events[-1].time if events else 0.0
    last_index = events[-1].index if events else 0
    out: list[Span] = []
    arrows: list[Arrow] = []
    turn: dict[str, TraceEvent] = {}
    wait: dict[str, TraceEvent] = {}
    crew_wait: dict[str, TraceEvent] = {}
    last_send: dict[str, TraceEvent] = {}
    for event in events:
        lane = lane_of(event)
        if event.kind == "status":
            opened = crew_wait.pop(event.crew, None)
            if opened is not None:
                out.append(Span(event.crew, "wait", opened.time, event.time, opened.index, event.index, "waiting"))
            if event.detail == "waiting_for_message":
                crew_wait[event.crew] = event
            continue
        if event.kind == "message" and event.agent:
            arrow = _arrow(event, lanes, last_send)
            if arrow is not None:
                arrows.append(arrow)
        if event.agent:
            opened = wait.get(lane)
            if opened is not None and event.kind in ("message", "tool_result", "agent"):
                del wait[lane]
                out.append(Span(lane, "wait", opened.time, event.time, opened.index, event.index, opened.detail))
            if lane not in turn and (event.kind in _STARTS_TURN or event.kind == "message"):
                turn[lane] = event
            if event.kind in _ENDS_TURN and lane in turn:
                began = turn.pop(lane)
                out.append(Span(lane, "turn", began.time, event.time, began.index, event.index, began.detail))
            if event.kind == "park":
                wait[lane] = event
        if event.kind in _SENDS:
            last_send[lane] = event
            last_send[event.crew] = event  # a crew sends through any of its lanes
    for lane, began in turn.items():
        out.append(Span(lane, "turn", began.time, end, began.index, last_index, began.detail))
    for lane, began in wait.items():
        out.append(Span(lane, "wait", began.time, end, began.index, last_index, began.detail))
    for crew, began in crew_wait.items():
        out.append(Span(crew, "wait", began.time, end, began.index, last_index, "waiting"))
    out.sort(key=lambda s: (s.first, s.lane, s.kind))
    return Spans(tuple(lanes), tuple(out), tuple(arrows), end)


def _arrow(event: TraceEvent, lanes: dict[str, None], last_send: dict[str, TraceEvent]) -> Arrow | None:
    match = _SOURCE.search(event.detail)
    if match is None:
        return None
    source = match.group("source")
    if source not in lanes:
        crew = source.split("/", 1)[0]
        if crew not in lanes:
            return None
        source = crew
    sent = last_send.get(source)
    topic = event.detail.split(" from ", 1)[0].removeprefix("crew mailbox ")
    return Arrow(
        source,
        lane_of(event),
        event.index if sent is None else sent.index,
        event.index,
        event.time,
        topic,
    )
