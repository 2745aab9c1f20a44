"""The simulation trace: every message an agent received, every tool call and result,
every orchestration transition and crew status change, stamped with virtual time.

Entries carry no randomly minted ids (message, correlation and wait ids are redacted).

Determinism, precisely: in a :class:`~orkeon_actors.sim.Simulation` every turn and timer
runs on one seeded scheduler (see :mod:`orkeon_actors.sim.scheduler`), so :meth:`Trace.events`,
*in recording order*, and :meth:`Trace.to_json`, byte for byte, are equal across runs and
processes with the same seed and crews, including within one virtual instant; another
seed may record deliveries ready at one instant in another order. :meth:`Trace.canonical`
(sorted) compares traces whose recording order is not meant to match.

A :class:`Trace` used as the observer of crews *outside* a simulation records in whatever
order their threads run: only its canonical form is stable then.

Kinds: ``crew`` (started, woke, completed, failed), ``status`` (the crew's status changed),
``task``, ``message``, ``event``, ``tool_call``, ``tool_result``, ``park``, ``answer``,
``agent`` (spawned, failed), ``transition`` (the orchestration's state), ``fault`` (an
injected fault, :mod:`orkeon_actors.sim.faults`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import attrs

__all__ = ["Trace", "TraceEvent"]


@attrs.frozen(order=True)
class TraceEvent:
    """One entry. ``time`` is virtual seconds since the simulation started; ``seq``
    numbers a crew's entries in the order its actor produced them; ``index`` numbers
    every entry of the trace in recording order."""

    time: float
    crew: str
    seq: int
    agent: str | None
    kind: str
    detail: str
    index: int = 0

    def line(self) -> str:
        return f"t={self.time:>9.3f}s  {self.line_body()}"

    def line_body(self) -> str:
        who = f"{self.crew}/{self.agent}" if self.agent else self.crew
        return f"{who:<28} {self.kind:<12} {self.detail}"


class Trace:
    """A thread-safe recorder (the crews' observer)."""

    def __init__(self, now: object) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._events: list[TraceEvent] = []
        self._seq: dict[str, int] = {}

    def record(self, crew_id: str, agent_id: str | None, kind: str, detail: str) -> None:
        time = float(self._now())  # type: ignore[operator]
        with self._lock:
            seq = self._seq.get(crew_id, 0)
            self._seq[crew_id] = seq + 1
            index = len(self._events)
            self._events.append(TraceEvent(round(time, 6), crew_id, seq, agent_id, kind, detail, index))

    def events(self) -> list[TraceEvent]:
        """Every entry, in recording order (virtual time never decreases along it)."""
        with self._lock:
            return list(self._events)

    def canonical(self) -> list[tuple[float, str, str, str, str]]:
        """``(time, crew, agent, kind, detail)`` sorted: equal for equal runs."""
        with self._lock:
            return sorted((e.time, e.crew, e.agent or "", e.kind, e.detail) for e in self._events)

    def timeline(self) -> str:
        """One line per entry, in recording order, behind one lane per crew (see
        :func:`timeline`)."""
        return timeline(self.events())

    def to_json(self) -> str:
        """Every entry as JSON (``--json``): byte-identical for equal runs."""
        return events_to_json(self.events())

    def __len__(self) -> int:
        return len(self._events)


def events_to_json(events: Sequence[TraceEvent]) -> str:
    """``events`` as a JSON array of objects with sorted keys (one serialisation for the
    CLI's ``--json``, the HTML file and the determinism tests)."""
    return json.dumps([attrs.asdict(e) for e in events], sort_keys=True, ensure_ascii=False, indent=None)


def events_from_json(text: str) -> list[TraceEvent]:
    """The inverse of :func:`events_to_json`."""
    data: list[dict[str, Any]] = json.loads(text)
    return [TraceEvent(**entry) for entry in data]


_LANE_MARK = {"here": "●", "running": "│", "waiting": "┆", "idle": " "}


def timeline(events: Sequence[TraceEvent]) -> str:
    """The text timeline: a header naming the crews, then one line per entry with a
    column per crew: ``●`` the crew this entry belongs to, ``│`` a crew running at that
    moment, ``┆`` one waiting for a message, blank before it started and after it
    finished. Crews live at the same virtual time show side by side: the lanes are the
    run's concurrency."""
    crews: list[str] = []
    for event in events:
        if event.crew not in crews:
            crews.append(event.crew)
    state = {crew: "idle" for crew in crews}
    header = "   ".join(f"{i + 1}" for i in range(len(crews)))
    lines = [f"lanes: {'  '.join(f'{i + 1}={c}' for i, c in enumerate(crews))}", f"{'':>11}  {header}"]
    for event in events:
        if event.kind == "crew" and event.detail.startswith(("started", "woke")):
            state[event.crew] = "running"
        elif event.kind == "status":
            state[event.crew] = {"waiting_for_message": "waiting", "completed": "idle", "failed": "idle"}.get(
                event.detail, "running"
            )
        marks = "   ".join(_LANE_MARK["here"] if c == event.crew else _LANE_MARK[state[c]] for c in crews)
        lines.append(f"t={event.time:>8.3f}s  {marks}  {event.line_body()}")
    return "\n".join(lines)
