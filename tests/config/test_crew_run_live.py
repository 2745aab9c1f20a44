"""``orkeon crew run`` prints what a crew does as it happens (a real subprocess read line by
line while the crew is still running), and ``--json`` streams one JSON object per event,
the agent events in their wire codec."""

from __future__ import annotations

import io
import json
import queue
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.cli.live_timeline import LiveTimeline
from orkeon_actors.cli.main import main
from orkeon_actors.crew import (
    Agent,
    CrewActor,
    ModelRequest,
    ModelResponse,
    start_crew,
    wait_finished,
)
from orkeon_actors.errors import CrewFailedError, ModelError
from orkeon_actors.model.agent_events import (
    AgentAnswered,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.wire.agent_events import decode_agent_event, encode_agent_event

ROOT = Path(__file__).resolve().parents[2]
SEQUENTIAL = ROOT / "examples/crews/sequential.yaml"  # the writer waits 60 s for a review request
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Lines:
    """A subprocess's stdout, line by line, as the lines come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        assert process.stdout is not None
        stdout = process.stdout

        def read() -> None:
            for line in stdout:
                self._lines.put(line.rstrip("\n"))
            self._lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def until(self, predicate: object, deadline_s: float = 30.0) -> list[str]:
        """The lines up to and including the first one ``predicate`` accepts."""
        seen: list[str] = []
        deadline = time.monotonic() + deadline_s
        while True:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f"the output ended without the awaited line: {seen}"
            seen.append(line)
            if predicate(line):  # type: ignore[operator]
                return seen


@pytest.fixture
def run_crew(tmp_path: Path) -> object:
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[subprocess.Popen[str], Lines]:
        command = [sys.executable, "-m", "orkeon_actors.cli", "crew", "run", str(SEQUENTIAL)]
        process = subprocess.Popen(
            [*command, "--store", str(tmp_path / "crew.db"), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        started.append(process)
        return process, Lines(process)

    yield start
    for process in started:
        process.kill()
        process.wait(timeout=30)


def test_the_timeline_is_printed_while_the_crew_runs(run_crew: object) -> None:
    process, lines = run_crew()  # type: ignore[operator]
    seen = lines.until(lambda line: "tool_call" in line and "wait_for_event" in line)
    assert process.poll() is None, "the crew is still waiting for its review request"
    assert seen[0].startswith("== crew newsroom (")
    assert any("tool_call" in line and "publish_event" in line for line in seen)


def test_json_streams_one_object_per_event_as_it_happens(run_crew: object) -> None:
    process, lines = run_crew("--json")  # type: ignore[operator]
    seen = [
        json.loads(line)
        for line in lines.until(lambda line: '"entry": "tool_call"' in line and "wait_for_event" in line)
    ]
    assert process.poll() is None, "the crew is still waiting for its review request"
    assert seen[0]["kind"] == "run_started" and seen[0]["name"] == "newsroom" and seen[0]["mode"] == "sequential"
    wait = seen[-1]
    assert (wait["kind"], wait["entry"], wait["agent"]) == ("trace", "tool_call", "writer")
    trace = [entry for entry in seen if entry["kind"] == "trace"]
    assert [entry["t"] for entry in trace] == sorted(entry["t"] for entry in trace)
    calls = [(entry["kind"], entry["agent_id"]) for entry in seen if entry["kind"] == "model_call_finished"]
    assert calls == [("model_call_finished", "writer")] * 2, "each model call is streamed as it ends"


def test_json_ends_with_the_outcome(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    crew = ROOT / "examples/crews/hierarchical.yaml"
    assert main(["crew", "run", str(crew), "--json", "--store", str(tmp_path / "crew.db")]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert objects[-1] == {
        "kind": "outcome",
        "crew": objects[0]["crew"],
        "status": "completed",
        "result": "report: r1 found prices; r2 found reviews",
        "failure": None,
    }
    answers = [o["detail"] for o in objects if o.get("entry") == "answer" and o["agent"] == "manager"]
    assert answers[-1] == "report: r1 found prices; r2 found reviews"


def _record_a_turn(rt: ok.Runtime) -> None:
    journal = rt.agent_events
    call = {"call_id": "call-1", "crew_id": "team", "agent_id": "writer", "turn": 0, "model": "gpt-4o-mini"}
    journal.record(ModelCallStarted(**call, provider="openai", started_at=AT))
    journal.record(
        ModelCallFinished(
            **call,
            provider="openai",
            started_at=AT,
            duration_s=1.25,
            input_tokens=120,
            output_tokens=30,
            cost=0.0021,
            finish_reasons=("tool_calls",),
            tool_calls=("post_message",),
        )
    )
    tool = {"call_id": "call-2", "crew_id": "team", "agent_id": "writer", "tool_call_id": "t1", "name": "post_message"}
    journal.record(ToolCallStarted(**tool, started_at=AT))
    journal.record(ToolCallFinished(**tool, started_at=AT, duration_s=0.01, replayed=True))
    journal.record(AgentAnswered(crew_id="team", agent_id="writer", at=AT))


def test_each_model_call_prints_its_model_duration_tokens_and_cost() -> None:
    out = io.StringIO()
    with ok.Runtime.start() as rt, LiveTimeline(out, now=lambda: 1.5) as timeline:
        timeline.follow(rt.agent_events)
        _record_a_turn(rt)
        timeline.close()
        assert timeline.totals() == "1 model call, 120 input + 30 output tokens, cost $0.0021"
    model, replay = out.getvalue().splitlines()
    assert model.split() == [
        "t=",
        "1.500s",
        "team/writer",
        "model",
        "gpt-4o-mini",
        "1.25s",
        "120+30",
        "tokens",
        "$0.0021",
        "[tool_calls]",
        "->",
        "post_message",
    ]
    assert replay.split()[2:] == ["team/writer", "tool_replay", "post_message", "(recorded", "result)"]


def test_json_mode_writes_every_agent_event_in_its_wire_codec() -> None:
    out = io.StringIO()
    with ok.Runtime.start() as rt, LiveTimeline(out, as_json=True) as timeline:
        timeline.follow(rt.agent_events)
        _record_a_turn(rt)
        timeline.close()
        recorded = rt.agent_events.recent()
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert printed == [encode_agent_event(event) for event in recorded]
    assert [decode_agent_event(obj) for obj in printed] == list(recorded)


class _Unreachable:
    """A model whose provider cannot be reached."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        raise ModelError("connection refused by 127.0.0.1:9", provider="openai", model="gpt-x")


@pytest.mark.parametrize("as_json", [False, True])
def test_an_agents_failure_is_printed_when_it_happens(as_json: bool) -> None:
    out = io.StringIO()
    with ok.Runtime.start() as rt, LiveTimeline(out, as_json=as_json, now=lambda: 0.5) as timeline:
        timeline.follow(rt.agent_events)
        ref = CrewActor.start(
            rt.hub, agents=[Agent("a", _Unreachable())], orchestration=Sequential([Task("go", "a")]), crew_id="c1"
        )
        try:
            start_crew(ref)
            with pytest.raises(CrewFailedError):
                wait_finished(ref, timeout=30)
        finally:
            ref.stop()
        timeline.close()
    last = out.getvalue().splitlines()[-1]
    if as_json:
        event = json.loads(last)
        assert (event["kind"], event["crew_id"], event["agent_id"]) == ("agent_failed", "c1", "a")
        assert event["reason"] == "model_error"
        assert event["error"] == "ModelError: connection refused by 127.0.0.1:9"
    else:
        assert last.split()[2:5] == ["c1/a", "failed", "model_error:"]
        assert last.endswith("ModelError: connection refused by 127.0.0.1:9")
