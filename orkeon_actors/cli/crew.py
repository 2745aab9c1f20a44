"""``orkeon crew``: the crew schema, validating crew documents, running a crew.

orkeon crew schema [--markdown]          print the canonical crew JSON Schema (or docs/crew-schema.md)
orkeon crew validate FILE... [--json]    0 if every crew is valid, 1 with every problem listed
orkeon crew run FILE [--store PATH]      run the crew on the embedded SQLite store, print what it does
                                         as it happens (messages, model and tool calls, tokens, cost)
orkeon crew run FILE --json              the same as one JSON object per line (docs/observability.md)
orkeon crew run FILE --simulate          run it on a virtual clock instead (waits expire at once)
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from orkeon_actors.config.blueprint import CrewBlueprint
from orkeon_actors.config.declarations import EventDeclarations
from orkeon_actors.config.issues import ConfigIssue
from orkeon_actors.config.launch import register_blueprint
from orkeon_actors.config.loader import load_crew
from orkeon_actors.config.schema import schema_text
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import CrewConfigError

__all__ = ["run_crew", "run_schema", "run_validate"]


def run_schema(*, markdown: bool = False) -> int:
    """Print the schema, byte for byte as shipped (or its Markdown reference)."""
    if markdown:
        from orkeon_actors.config.schema_docs import render_markdown

        print(render_markdown(), end="")
    else:
        print(schema_text(), end="")
    return 0


def run_validate(files: Sequence[str], *, as_json: bool = False) -> int:
    """Validate each file (or multi-file directory); print ``FILE: ok`` or every
    problem (``--json``: one object per file with its issues). 0 if all are valid."""
    results: list[dict[str, object]] = []
    code = 0
    for file in files:
        issues: tuple[ConfigIssue, ...] = ()
        try:
            blueprint: CrewBlueprint | None = load_crew(file)
        except CrewConfigError as exc:
            blueprint = None
            issues = tuple(i for i in exc.issues if isinstance(i, ConfigIssue))
            code = 1
        results.append(
            {
                "file": file,
                "valid": blueprint is not None,
                "crew": None if blueprint is None else blueprint.name,
                "issues": [i.to_dict() for i in issues],
            }
        )
        if not as_json:
            if blueprint is not None:
                mode, agents = blueprint.orchestration.mode, len(blueprint.agents)
                print(f"{file}: ok (crew {blueprint.name!r}, {mode}, {agents} agents)")
            else:
                print(f"{file}: {len(issues)} problem{'s' if len(issues) != 1 else ''}")
                for issue in issues:
                    print(f"  {issue}")
    if as_json:
        print(json.dumps(results, indent=2))
    return code


def run_crew(
    file: str,
    *,
    store: str | None = None,
    simulate: bool = False,
    timeout: float = 300.0,
    studio: int | None = None,
    as_json: bool = False,
) -> int:
    """Run the crew at ``file`` to its end, printing what it does as it happens, then its
    outcome (``as_json``: one JSON object per line): 0 when it completed, 1 when it failed
    or did not finish within ``timeout`` seconds, 2 when the document is invalid."""
    try:
        blueprint = load_crew(file)
    except CrewConfigError as exc:
        print(json.dumps({"kind": "invalid", "problems": str(exc)}) if as_json else exc)
        return 2
    if simulate:
        return _simulate(blueprint, as_json)
    return _run_durable(blueprint, store, timeout, studio, as_json)


def _simulate(blueprint: CrewBlueprint, as_json: bool = False) -> int:
    from orkeon_actors.sim.simulation import Simulation

    with Simulation(middleware=[EventDeclarations()]) as sim:
        crew = sim.spawn(blueprint)
        result = sim.run(until=24 * 3600)
        status, answer, failure = result.crews[crew]
        if as_json:
            for e in sim.trace.events():
                entry = {"kind": "trace", "entry": e.kind, "t": e.time, "crew": e.crew, "agent": e.agent}
                print(json.dumps({**entry, "detail": e.detail}))
            outcome = {"kind": "outcome", "crew": str(crew), "status": status.value, "result": answer}
            print(json.dumps({**outcome, "failure": failure, "virtual_time": result.virtual_time}))
        else:
            mode, virtual = blueprint.orchestration.mode, result.virtual_time
            print(f"== crew {blueprint.name} ({crew}, {mode}, simulated {virtual:g}s)")
            print(sim.trace.timeline())
            print(f"-> {status.value}: {answer if failure is None else failure}")
        return 0 if status is CrewStatus.COMPLETED else 1


def _run_durable(
    blueprint: CrewBlueprint, store: str | None, timeout: float, studio: int | None = None, as_json: bool = False
) -> int:
    from orkeon_actors.cli.live_timeline import LiveTimeline
    from orkeon_actors.lifecycle.supervisor import CrewSupervisor
    from orkeon_actors.runtime import Runtime

    with tempfile.TemporaryDirectory(prefix="orkeon-crew-") as scratch:
        path = store or str(Path(scratch) / "crew.db")
        started = time.monotonic()
        timeline = LiveTimeline(as_json=as_json, now=lambda: time.monotonic() - started)
        with timeline, Runtime.start(store=path, middleware=[EventDeclarations()], studio=studio) as runtime:
            timeline.follow(runtime.agent_events)
            if runtime.studio is not None:
                timeline.emit(f"Studio: {runtime.studio.url}", kind="studio", url=runtime.studio.url)
            supervisor = CrewSupervisor.start(runtime)
            try:
                register_blueprint(supervisor, blueprint, observer=timeline)
                crew = supervisor.spawn(blueprint.name)
                mode = blueprint.orchestration.mode
                timeline.emit(
                    f"== crew {blueprint.name} ({crew}, {mode}) on store {path}",
                    kind="run_started",
                    crew=str(crew),
                    name=blueprint.name,
                    mode=mode,
                    store=path,
                )
                pause = threading.Event()
                deadline = started + timeout
                while supervisor.outcome(crew) is None and time.monotonic() < deadline:
                    pause.wait(0.02)
                outcome = supervisor.outcome(crew)
                timeline.close()  # every line so far is out before the outcome
                totals = timeline.totals()
                if outcome is None:
                    state = supervisor.state(crew).value
                    _print_outcome(as_json, f"-> not finished after {timeout:g}s (state {state})", str(crew), state)
                    return 1
                detail = outcome.result if outcome.failure is None else outcome.failure
                if totals is not None and not as_json:
                    print(f"   {totals}")
                status = outcome.status.value
                _print_outcome(
                    as_json, f"-> {status}: {detail}", str(crew), status, result=outcome.result, failure=outcome.failure
                )
                if runtime.studio is not None:
                    _serve_until_interrupted(runtime.studio.url)
                return 0 if outcome.status is CrewStatus.COMPLETED else 1
            finally:
                supervisor.stop()


def _print_outcome(as_json: bool, text: str, crew: str, status: str, **fields: object) -> None:
    if as_json:
        print(json.dumps({"kind": "outcome", "crew": crew, "status": status, **fields}), flush=True)
    else:
        print(text, flush=True)


def _serve_until_interrupted(url: str) -> None:
    """Keep the Studio up after the run, for a look at what happened, until Ctrl-C."""
    print(f"the Studio stays up at {url}; Ctrl-C stops it", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("stopped", flush=True)
