"""A simulation as one self-contained HTML file (``orkeon simulate MODE --html run.html``).

No script, no stylesheet or font from elsewhere: inline CSS and SVG drawn here, so the file
opens offline, in any browser, and renders the same every time (the same trace gives the
same bytes). Two views of the trace (:mod:`orkeon_actors.sim.spans`):

* a **sequence diagram**: one column (lane) per crew and per agent, time running down one
  row per trace entry (the scheduler's order; the virtual time is on the left); a dot per
  entry, its detail on hover; messages as arrows from the sending lane to the receiving
  one; waits (an agent parked, a crew waiting for a message) as hatched bars; agent
  turns as solid bars; injected faults in red;
* a **Gantt chart** of agent turns and waits on the virtual clock (x axis in virtual
  seconds; a turn takes no virtual time, so it shows as a thin tick at its instant).

Every lane header carries ``data-lane``: the browser test counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from orkeon_actors.sim.spans import Spans, lane_of, spans
from orkeon_actors.sim.trace import TraceEvent

__all__ = ["to_html"]

_COL = 112
_ROW = 16
_TOP = 60
_LEFT = 90
_GANTT_W = 900
_GANTT_ROW = 22

_CSS = """
body{font:13px system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
.meta{color:#555;margin-bottom:10px} svg{display:block} .legend span{margin-right:14px}
.sw{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
text{font:11px system-ui,sans-serif} .lane-header{font-weight:600}
.crew-header{fill:#0b3d91} .agent-header{fill:#333} .life{stroke:#ccc}
.turn{fill:#3b7dd8} .wait{fill:url(#hatch);stroke:#d89b3b} .crewwait{fill:#f3e3c3}
.dot{fill:#555} .dot.fault{fill:#d62728} .dot.crew{fill:#0b3d91} .msg{stroke:#2a9d55;stroke-width:1.3}
.time{fill:#777} .gtick{stroke:#eee}
"""


def to_html(events: Sequence[TraceEvent], *, title: str = "orkeon simulation") -> str:
    """The HTML document of ``events`` (module docstring)."""
    view = spans(events)
    crews = sum(1 for lane in view.lanes if "/" not in lane)
    meta = (
        f"{len(events)} entries, {crews} crew{'s' * (crews != 1)}, {len(view.lanes) - crews} agents, "
        f"{len(view.arrows)} messages, {view.end:g}s virtual"
    )
    legend = (
        '<div class="legend"><span><i class="sw" style="background:#3b7dd8"></i>agent turn</span>'
        '<span><i class="sw" style="background:#f0c27a"></i>wait (parked agent)</span>'
        '<span><i class="sw" style="background:#f3e3c3"></i>crew waiting for a message</span>'
        '<span><i class="sw" style="background:#2a9d55"></i>message</span>'
        '<span><i class="sw" style="background:#d62728"></i>injected fault</span></div>'
    )
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1><div class=\"meta\">{escape(meta)}</div>{legend}"
        f'<h2>Sequence diagram</h2>{_sequence(events, view)}'
        f'<h2>Gantt chart of agent turns (virtual clock)</h2>{_gantt(view)}'
        "</body></html>\n"
    )


def _x(view: Spans, lane: str) -> int:
    return _LEFT + view.lanes.index(lane) * _COL + _COL // 2


def _y(row: int) -> int:
    return _TOP + row * _ROW + _ROW // 2


def _sequence(events: Sequence[TraceEvent], view: Spans) -> str:
    width = _LEFT + len(view.lanes) * _COL + 20
    height = _TOP + len(events) * _ROW + 20
    parts = [
        f'<svg id="sequence" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#f0c27a"/><line x1="0" y1="0" x2="0" y2="6" stroke="#d89b3b" '
        'stroke-width="2"/></pattern>'
        '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        '<path d="M0,0L10,5L0,10z" fill="#2a9d55"/></marker></defs>',
    ]
    for lane in view.lanes:
        x = _x(view, lane)
        is_crew = "/" not in lane
        label = lane if is_crew else lane.split("/", 1)[1]
        kind = "crew-header" if is_crew else "agent-header"
        parts.append(f'<line class="life" x1="{x}" y1="{_TOP - 6}" x2="{x}" y2="{height - 10}"/>')
        parts.append(
            f'<text class="lane-header {kind}" data-lane="{escape(lane)}" x="{x}" '
            f'y="{_TOP - 28 if is_crew else _TOP - 12}" '
            f'text-anchor="middle"><title>{escape(lane)}</title>{escape(label)}</text>'
        )
    for span in view.spans:
        x = _x(view, span.lane)
        top, bottom = _y(span.first), _y(span.last)
        is_crew = "/" not in span.lane
        if span.kind == "wait":
            css, half = ("crewwait", 10) if is_crew else ("wait", 5)
        else:
            css, half = "turn", 3
        parts.append(
            f'<rect class="{css}" data-lane="{escape(span.lane)}" x="{x - half}" y="{top}" width="{2 * half}" '
            f'height="{max(bottom - top, 3)}"><title>{escape(span.kind)} {span.start:g}s-{span.end:g}s: '
            f"{escape(span.label)}</title></rect>"
        )
    last_time: float | None = None
    for event in events:
        y = _y(event.index)
        if event.time != last_time:
            parts.append(f'<text class="time" x="4" y="{y + 4}">t={event.time:.3f}s</text>')
            last_time = event.time
        css = "dot fault" if event.kind == "fault" else "dot crew" if event.agent is None else "dot"
        parts.append(
            f'<circle class="{css}" cx="{_x(view, lane_of(event))}" cy="{y}" r="3">'
            f"<title>#{event.index} t={event.time:g}s {escape(lane_of(event))} {escape(event.kind)}: "
            f"{escape(event.detail)}</title></circle>"
        )
    for arrow in view.arrows:
        x1, x2 = _x(view, arrow.source), _x(view, arrow.target)
        y1, y2 = _y(arrow.sent), _y(arrow.received)
        if x1 == x2:
            x1 += 4
        parts.append(
            f'<line class="msg" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" marker-end="url(#arrow)">'
            f"<title>{escape(arrow.source)} → {escape(arrow.target)}: {escape(arrow.label)}</title></line>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _gantt(view: Spans) -> str:
    agents = [lane for lane in view.lanes if "/" in lane]
    scale = _GANTT_W / view.end if view.end > 0 else 0.0
    height = 30 + len(agents) * _GANTT_ROW + 20
    width = _LEFT * 2 + _GANTT_W + 20
    left = _LEFT * 2
    parts = [f'<svg id="gantt" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">']
    ticks = 10 if view.end > 0 else 1
    for i in range(ticks + 1):
        tick = left + round(i * _GANTT_W / ticks)
        seconds = view.end * i / ticks
        parts.append(f'<line class="gtick" x1="{tick}" y1="20" x2="{tick}" y2="{height - 10}"/>')
        parts.append(f'<text class="time" x="{tick}" y="14" text-anchor="middle">{seconds:.3g}s</text>')
    for row, lane in enumerate(agents):
        y = 26 + row * _GANTT_ROW
        parts.append(
            f'<text class="gantt-lane" data-lane="{escape(lane)}" x="4" y="{y + 13}">{escape(lane)}</text>'
        )
        for span in (s for s in view.spans if s.lane == lane):
            x = left + span.start * scale
            w = max((span.end - span.start) * scale, 2.0)
            css = "wait" if span.kind == "wait" else "turn"
            parts.append(
                f'<rect class="{css}" x="{x:.1f}" y="{y + (5 if css == "turn" else 2)}" width="{w:.1f}" '
                f'height="{8 if css == "turn" else 14}"><title>{escape(lane)} {escape(span.kind)} '
                f"{span.start:g}s-{span.end:g}s: {escape(span.label)}</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)
