"""A read-only view of a store (``orkeon store crews``, ``orkeon store show``,
``orkeon studio --store``) shows the state the runtime last committed for each crew:
a crew woken from its snapshot, or checkpointed without sleeping, runs, so the store
says ``Active`` (with when that was committed), never ``Asleep``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.cli.main import main
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.studio import StoreFileSource
from orkeon_actors.testing import wait_until


def _waiting_forever(tool: str, arguments: dict[str, Any]) -> Any:
    def policy(_request: ModelRequest) -> ModelResponse:
        return call(tool, arguments)

    def factory(_crew: Any) -> CrewBlueprint:
        agent = Agent("a", ScriptedModel(policy=policy), max_turns=1000)
        return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))

    return factory


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[CrewSupervisor, Path]]:
    db = tmp_path / "state.db"
    rt = ok.Runtime.start(store=db)
    factories = {
        "inbox": _waiting_forever("receive_message", {"wait_forever": True}),
        "reader": _waiting_forever("wait_for_event", {"topic": "orders", "wait_forever": True}),
    }
    sup = CrewSupervisor(rt, factories=factories)
    try:
        yield sup, db
    finally:
        sup.stop()
        rt.stop()


def _crew_row(db: Path, crew: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The crew's row as ``orkeon store PATH crews --json`` prints it (read-only, beside
    the runtime that owns the file)."""
    assert main(["store", str(db), "crews", "--json"]) == 0
    rows = [row for row in json.loads(capsys.readouterr().out) if row["crew_id"] == crew]
    assert len(rows) == 1, rows
    return dict(rows[0])


def test_a_woken_crew_reads_active_in_every_store_view(
    running: tuple[CrewSupervisor, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sup, db = running
    sup.spawn("inbox", "c")
    wait_until(lambda: sup.status("c") is CrewStatus.WAITING, what="c waiting")
    assert sup.sleep("c") is True
    asleep = _crew_row(db, "c", capsys)
    assert asleep["state"] == "Asleep"
    sup.wake("c")
    wait_until(lambda: _crew_row(db, "c", capsys)["state"] == "Active", what="the store to say c is Active")
    active = _crew_row(db, "c", capsys)
    assert active["as_of"] >= asleep["as_of"] and active["age_s"] >= 0
    assert main(["store", str(db), "show", "c"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "Active"
    (studio,) = [c for c in StoreFileSource(db).overview()["crews"] if c["id"] == "c"]
    assert studio["state"] == "Active"
    wait_until(lambda: sup.status("c") is CrewStatus.WAITING, what="c waiting again")
    assert sup.sleep("c") is True  # and asleep again once it sleeps
    assert _crew_row(db, "c", capsys)["state"] == "Asleep"


def test_a_checkpointed_crew_that_never_slept_reads_active(
    running: tuple[CrewSupervisor, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sup, db = running
    sup.spawn("reader", "c")  # parks on a topic cursor: its checkpoint commits a snapshot row
    wait_until(lambda: sup.status("c") is CrewStatus.WAITING, what="c parked on its cursor")
    wait_until(lambda: sup.durable("c"), what="its checkpoint committed")
    assert _crew_row(db, "c", capsys)["state"] == "Active"
