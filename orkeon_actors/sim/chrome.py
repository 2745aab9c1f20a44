"""A simulation trace in the Chrome trace event format (``orkeon simulate MODE --trace run.json``).

Opens in Perfetto (ui.perfetto.dev) and ``chrome://tracing``. One *process* per crew, one
*thread* per lane (the crew's own lane first, then its agents); timestamps are virtual
microseconds since the simulation started:

* every trace entry is an instant event (``ph: "i"``) named by its kind, the detail and
  the entry's index in ``args``;
* turns and waits (:mod:`orkeon_actors.sim.spans`) are complete events (``ph: "X"``,
  ``cat`` ``turn`` or ``wait``);
* messages are flow events (``ph: "s"`` / ``"f"``) from the sending lane to the receiving
  one.

Events at one virtual instant share a timestamp: their order is the ``index`` in ``args``
(the scheduler's order). The file is JSON with sorted keys: byte-identical for equal runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orkeon_actors.sim.spans import lane_of, spans
from orkeon_actors.sim.trace import TraceEvent

__all__ = ["to_chrome_trace"]


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def to_chrome_trace(events: Sequence[TraceEvent]) -> str:
    """``events`` as a Chrome trace JSON document (module docstring)."""
    view = spans(events)
    crews = [lane for lane in view.lanes if "/" not in lane]
    pid = {crew: i + 1 for i, crew in enumerate(crews)}
    tid: dict[str, int] = {}
    for lane in view.lanes:
        crew = lane.split("/", 1)[0]
        tid[lane] = 1 + sum(1 for other in tid if other.split("/", 1)[0] == crew)

    def where(lane: str) -> dict[str, int]:
        return {"pid": pid[lane.split("/", 1)[0]], "tid": tid[lane]}

    out: list[dict[str, Any]] = []
    for crew in crews:
        out.append({"ph": "M", "name": "process_name", "args": {"name": crew}, "pid": pid[crew], "tid": 0})
    for lane in view.lanes:
        name = lane.split("/", 1)[1] if "/" in lane else "(crew)"
        out.append({"ph": "M", "name": "thread_name", "args": {"name": name}, **where(lane)})
    for event in events:
        out.append(
            {
                "ph": "i",
                "s": "t",
                "name": event.kind,
                "cat": "entry",
                "ts": _us(event.time),
                "args": {"detail": event.detail, "index": event.index},
                **where(lane_of(event)),
            }
        )
    for span in view.spans:
        out.append(
            {
                "ph": "X",
                "name": span.kind,
                "cat": span.kind,
                "ts": _us(span.start),
                "dur": _us(span.end - span.start),
                "args": {"label": span.label, "first": span.first, "last": span.last},
                **where(span.lane),
            }
        )
    for number, arrow in enumerate(view.arrows, 1):
        common = {"name": arrow.label, "cat": "message", "id": number, "ts": _us(arrow.time)}
        out.append({"ph": "s", **common, **where(arrow.source)})
        out.append({"ph": "f", "bp": "e", **common, **where(arrow.target)})
    document = {"displayTimeUnit": "ms", "otherData": {"clock": "virtual"}, "traceEvents": out}
    return json.dumps(document, sort_keys=True, ensure_ascii=False)
