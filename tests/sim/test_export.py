"""The views of a run: text lanes, raw JSON, the Chrome trace, the HTML file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orkeon_actors.cli.main import main
from orkeon_actors.sim import Simulation
from orkeon_actors.sim.chrome import to_chrome_trace
from orkeon_actors.sim.examples import EXAMPLES
from orkeon_actors.sim.html import to_html
from orkeon_actors.sim.spans import spans
from orkeon_actors.sim.trace import TraceEvent, events_from_json


def _events(*modes: str, seed: int = 0) -> list[TraceEvent]:
    with Simulation(seed=seed) as sim:
        for mode in modes:
            EXAMPLES[mode](sim)
        sim.run()
        return sim.trace.events()


def test_the_json_round_trips_and_the_views_are_byte_identical_for_equal_runs() -> None:
    a, b = _events(*EXAMPLES), _events(*EXAMPLES)
    with Simulation(seed=0) as sim:
        for build in EXAMPLES.values():
            build(sim)
        sim.run()
        assert events_from_json(sim.trace.to_json()) == sim.trace.events() == a
    assert to_html(a) == to_html(b) and to_chrome_trace(a) == to_chrome_trace(b)


def test_the_text_timeline_has_a_lane_per_crew_showing_who_runs_and_who_waits() -> None:
    seen: set[str] = set()
    for seed in range(10):
        with Simulation(seed=seed) as sim:
            crews = [EXAMPLES[m](sim) for m in ("sequential", "hierarchical")]
            sim.run()
            lines = sim.trace.timeline().splitlines()
        assert lines[0] == f"lanes: 1={crews[0]}  2={crews[1]}" or lines[0] == f"lanes: 1={crews[1]}  2={crews[0]}"
        seen |= {line[13:18] for line in lines[2:]}  # the two lanes: "X   Y"
    assert "●    " in seen  # a crew's own entry, the other not started yet
    assert "┆   ●" in seen or "●   ┆" in seen, seen  # the writer waits its minute while the research runs


def test_spans_turns_waits_and_arrows_of_the_hierarchical_example() -> None:
    view = spans(_events("hierarchical"))
    crew = view.lanes[0]
    assert view.lanes[:2] == (crew, f"{crew}/manager")  # then r1 and r2, in the order the seed ran them
    assert sorted(view.lanes[2:]) == [f"{crew}/r1", f"{crew}/r2"]
    turns = {s.lane for s in view.spans if s.kind == "turn"}
    assert turns == {f"{crew}/manager", f"{crew}/r1", f"{crew}/r2"}
    assert {(a.source, a.target) for a in view.arrows} >= {(crew, f"{crew}/r1"), (crew, f"{crew}/manager")}
    waits = [s for s in spans(_events("sequential")).spans if s.kind == "wait" and "/" in s.lane]
    assert [(s.start, s.end) for s in waits] == [(0.0, 60.0)]  # the writer's one-minute wait


def test_the_chrome_trace_has_a_process_per_crew_a_thread_per_lane_and_complete_events() -> None:
    events = _events("sequential", "hierarchical")
    doc = json.loads(to_chrome_trace(events))
    trace = doc["traceEvents"]
    names = {e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {e.crew for e in events}
    threads = {(e["pid"], e["tid"]) for e in trace if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len(threads) == len(spans(events).lanes)
    waits = [e for e in trace if e["ph"] == "X" and e["cat"] == "wait" and e["dur"] == 60_000_000]
    assert waits  # the writer's wait, in virtual microseconds
    assert sum(1 for e in trace if e["ph"] == "i") == len(events)
    assert {e["ph"] for e in trace} >= {"M", "i", "X", "s", "f"}


def test_the_html_is_self_contained_and_names_every_lane() -> None:
    events = _events(*EXAMPLES)
    page = to_html(events, title="six modes")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script|<link|@import|src=|href=\"http", page)
    lanes = set(re.findall(r'class="lane-header [a-z-]+" data-lane="([^"]+)"', page))
    assert lanes == set(spans(events).lanes)
    assert 'id="sequence"' in page and 'id="gantt"' in page


def test_the_cli_writes_the_files_it_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html, trace = tmp_path / "run.html", tmp_path / "run.json"
    assert main(["simulate", "all", "--seed", "3", "--html", str(html), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert f"HTML written to {html}" in out and f"Chrome trace written to {trace}" in out
    assert html.read_text(encoding="utf-8").count('class="lane-header crew-header"') == 6
    assert json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    assert main(["simulate", "graph", "--json"]) == 0
    assert events_from_json(capsys.readouterr().out)[0].kind == "crew"
    runs = []
    for seed in ("1", "1", "2"):
        assert main(["simulate", "all", "--seed", seed, "--json"]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1] != runs[2]  # --seed is real: it changes the run, and only it
    with pytest.raises(SystemExit) as unknown:  # argparse lists the choices and exits with status 2
        main(["simulate", "nope"])
    assert unknown.value.code == 2
