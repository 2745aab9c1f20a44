"""The simulation trace: every message an agent received, every tool call and result,
every orchestration transition and crew status change, stamped with virtual time.

Entries carry no randomly minted ids (message, correlation and wait ids are redacted).

Determinism, precisely: in a :class:`~orkeon_actors.sim.Simulation` crews run one
delivery at a time in an order that never depends on thread timing (see
:mod:`orkeon_actors.sim.gate`), so :meth:`Trace.events`, *in recording order*, is equal
across runs with the same seed and crews, entry for entry, including within one virtual
instant (two workers' results reaching their manager at the same virtual time are
recorded, and handled, in the same order every run). :meth:`Trace.canonical` (sorted) is
kept for comparing traces whose recording order is not meant to match.

A :class:`Trace` used as the observer of crews *outside* a simulation (no gate) records
in whatever order their threads run: only its canonical form is stable then.
"""

from __future__ import annotations

import threading

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
        who = f"{self.crew}/{self.agent}" if self.agent else self.crew
        return f"t={self.time:>9.3f}s  {who:<28} {self.kind:<12} {self.detail}"


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
        """One line per entry, in recording order."""
        return "\n".join(e.line() for e in self.events())

    def __len__(self) -> int:
        return len(self._events)
