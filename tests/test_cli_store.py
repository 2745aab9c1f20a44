"""`orkeon store PATH ...`: a store looked into without SQL, read-only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.cli.main import main
from orkeon_actors.crew import Agent, CrewStatus, ScriptedModel, call, respond
from orkeon_actors.errors import CrewFailedError
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until


def _crew(*script: object) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(list(script)))  # type: ignore[arg-type]
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store with a sleeping crew (two waits), a failed one, a completed one, a kept
    post, a retained value."""
    db = tmp_path_factory.mktemp("store") / "state.db"
    rt = ok.Runtime.start(store=db)
    factories = {
        "sleepy": lambda _: _crew(call("wait_for_event", {"topic": "alerts.*", "timeout_ms": 3_600_000}), respond("x")),
        "forever": lambda _: _crew(call("receive_message", {"wait_forever": True}), respond("y")),
        "bad": lambda _: _crew(),
        "good": lambda _: _crew(respond("fine")),
    }
    sup = CrewSupervisor(rt, factories=factories)  # type: ignore[arg-type]
    for name in ("sleepy", "forever"):
        sup.spawn(name, name)
        wait_until(lambda n=name: sup.status(n) is CrewStatus.WAITING, what=f"{name} waiting")  # type: ignore[misc]
        assert sup.sleep(name)
    sup.spawn("bad", "bad")
    with pytest.raises(CrewFailedError):
        sup.wait_finished("bad", timeout=30)
    sup.spawn("good", "good")
    sup.wait_finished("good", timeout=30)
    rt.hub.register_mailbox("agent://audit/log")
    rt.hub.bind("orders", "p").post("agent://audit/log", {"n": 1})
    keep = ok.PublishOptions(retain_as_last_value=True, last_value_key="orders.status")
    rt.hub.bind("orders", "p").publish("orders.status", {"open": 3}, options=keep)
    sup.stop()
    rt.stop()
    yield db


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(["store", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_crews_lists_sleeping_failed_and_completed_crews(populated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crews = {c["crew_id"]: c for c in _json(capsys, str(populated), "crews")}  # type: ignore[union-attr]
    assert {k: v["state"] for k, v in crews.items()} == {
        "bad": "Failed",
        "forever": "Asleep",
        "good": "Completed",
        "sleepy": "Asleep",
    }
    assert crews["sleepy"]["pending_waits"] == 1 and crews["sleepy"]["mode"] == "sequential"
    assert crews["sleepy"]["name"] == "sleepy" and crews["sleepy"]["snapshot_at"].endswith("Z")
    assert crews["bad"]["finished_at"].endswith("Z") and crews["good"]["snapshot_at"] is None
    assert main(["store", str(populated), "crews"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("states as last committed to the store")
    columns = ["crew_id", "name", "mode", "state", "agents", "pending_waits", "as_of", "age_s"]
    assert table[1].split() == columns
    assert len(table) == 6


def test_waits_are_sorted_by_deadline_and_forever_last(populated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    waits = _json(capsys, str(populated), "waits")
    assert [(w["crew_id"], w["kind"], w["target"]) for w in waits] == [  # type: ignore[union-attr]
        ("sleepy", "OnTopic", "alerts.*"),
        ("forever", "OnMailbox", "agent://forever/a"),
    ]
    assert waits[0]["expires_at"].endswith("Z") and waits[1]["expires_at"] is None  # type: ignore[index]


def test_mailboxes_outbox_last_values(populated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    boxes = {b["address"]: b["depth"] for b in _json(capsys, str(populated), "mailboxes")}  # type: ignore[union-attr]
    assert boxes["agent://audit/log"] == 1 and boxes["agent://forever/a"] == 0
    assert _json(capsys, str(populated), "outbox") == []
    [last] = _json(capsys, str(populated), "last-values")  # type: ignore[misc]
    assert last["key"] == "orders.status" and last["payload"] == '{"open":3}'


def test_show_prints_a_snapshot_or_an_outcome_as_json(populated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", str(populated), "show", "sleepy"]) == 0
    out = capsys.readouterr().out
    assert "+00:00" not in out, "one timestamp format, the snapshot's own included: RFC 3339 with Z"
    shown = json.loads(out)
    assert shown["state"] == "Asleep" and shown["snapshot"]["id"] == "sleepy" and len(shown["pending_waits"]) == 1
    assert main(["store", str(populated), "show", "bad"]) == 0
    failed = json.loads(capsys.readouterr().out)
    assert failed["state"] == "Failed" and failed["outcome"]["failure"]["error_type"] == "ScriptExhaustedError"
    assert main(["store", str(populated), "show", "good"]) == 0
    assert json.loads(capsys.readouterr().out)["outcome"]["result"] == "fine"
    assert main(["store", str(populated), "show", "nobody"]) == 1
    assert "no crew 'nobody'" in capsys.readouterr().out


def test_show_needs_a_crew_id(populated: Path) -> None:
    with pytest.raises(SystemExit) as done:
        main(["store", str(populated), "show"])
    assert done.value.code == 2


def test_views_are_read_only_and_work_beside_a_running_runtime(
    populated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = populated.read_bytes()
    with ok.Runtime.start(store=populated) as rt:  # the owner holds the lock; the views do not need it
        rt.hub.bind("orders", "p").post("agent://audit/log", {"n": 2})
        boxes = {b["address"]: b["depth"] for b in _json(capsys, str(populated), "mailboxes")}  # type: ignore[union-attr]
        assert boxes["agent://audit/log"] == 2  # it sees what the runtime committed
        assert main(["store", str(populated), "purge", "--dry-run"]) == 1  # purge needs the lock
        assert "already open" in capsys.readouterr().err
        rt.hub.register_mailbox("agent://audit/log").reader().receive()
    assert before  # the file stayed an orkeon store (opened again above)


def test_purge_dry_run_reports_and_deletes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "p.db"
    clock = ok.VirtualClock()
    with ok.Runtime.start(store=db, clock=clock) as rt:
        sup = CrewSupervisor(rt, factories={"good": lambda _: _crew(respond("fine"))})  # type: ignore[dict-item]
        sup.spawn("good", "old")
        sup.wait_finished("old", timeout=30)
        sup.stop()
    # outcomes are kept 7 days: as of now (the real clock is past the virtual 2026-01-01 + 7 d) purgeable
    report = _json(capsys, str(db), "purge", "--dry-run")
    assert report["dry_run"] is True and report["outcomes"] == 1  # type: ignore[index]
    assert len(_json(capsys, str(db), "crews")) == 1  # type: ignore[arg-type]
    assert _json(capsys, str(db), "purge")["outcomes"] == 1  # type: ignore[index]
    assert _json(capsys, str(db), "crews") == []


def test_a_missing_file_is_a_readable_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", str(tmp_path / "nope.db"), "crews"]) == 1
    err = capsys.readouterr().err
    assert "no store file at" in err and "Traceback" not in err


def test_crews_say_how_old_each_state_is_and_show_takes_the_printed_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "named.db")
    with ok.Runtime.start(store=db) as rt:
        sup = CrewSupervisor(rt, factories={"billing": lambda _: _crew(respond("paid"))})  # type: ignore[dict-item]
        sup.spawn("billing", "billing-7")
        sup.wait_finished("billing-7", timeout=30)
        sup.stop()
    (row,) = _json(capsys, db, "crews")  # type: ignore[misc]
    described = (row["crew_id"], row["name"], row["state"], row["mode"])
    assert described == ("billing-7", "billing", "Completed", "sequential")
    assert row["agents"] == ["a"] and row["as_of"] == row["finished_at"] and row["age_s"] >= 0
    assert main(["store", db, "crews"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("states as last committed to the store") and "age_s" in table
    assert main(["store", db, "show", "billing"]) == 0  # the name `crews` prints
    assert json.loads(capsys.readouterr().out)["crew_id"] == "billing-7"
