"""The simulation trace: every message an agent received, every tool call and result,
every orchestration transition and crew status change, stamped with virtual time.

Entries carry no randomly minted ids (message and correlation ids are redacted).

Determinism, precisely: :meth:`Trace.canonical` (entries sorted by virtual time, crew,
agent, kind and text) is equal across runs with the same seed and crews. The recorded
order (:meth:`Trace.events`, per crew in actor order) can differ *within one virtual
instant* when two messages race to the same crew from different mailbox actors (e.g. two
workers' results reaching a manager at the same virtual time); what happens at each
instant does not.
"""

from __future__ import annotations

import threading

import attrs

__all__ = ["Trace", "TraceEvent"]


@attrs.frozen(order=True)
class TraceEvent:
    """One entry. ``time`` is virtual seconds since the simulation started; ``seq``
    orders a crew's entries as its actor produced them."""

    time: float
    crew: str
    seq: int
    agent: str | None
    kind: str
    detail: str

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
            self._events.append(TraceEvent(round(time, 6), crew_id, seq, agent_id, kind, detail))

    def events(self) -> list[TraceEvent]:
        """Entries by (virtual time, crew, the crew's recording order)."""
        with self._lock:
            return sorted(self._events)

    def canonical(self) -> list[tuple[float, str, str, str, str]]:
        """``(time, crew, agent, kind, detail)`` sorted: equal for equal runs."""
        with self._lock:
            return sorted((e.time, e.crew, e.agent or "", e.kind, e.detail) for e in self._events)

    def timeline(self) -> str:
        return "\n".join(e.line() for e in self.events())

    def __len__(self) -> int:
        return len(self._events)
