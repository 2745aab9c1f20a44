"""The agent view's read: the runtime's agent events after a cursor, as the wire JSON,
history included, refused crews left out, a bad cursor a JSON 400."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink, RestrictiveCrewLinkPolicy
from orkeon_actors.model.agent_events import AgentAnswered, AgentEventJournal, ModelCallStarted
from orkeon_actors.store.agent_events import AgentEventRecorder
from orkeon_actors.studio import StoreFileSource, StudioServer
from orkeon_actors.testing import wait_until
from orkeon_actors.wire.agent_events import decode_agent_event


def _get(server: StudioServer, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", path + "&token=" + server.token)
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    return response.status, body


def test_agent_events_are_read_after_a_cursor_with_the_history() -> None:
    registry = AclRegistry()
    registry.register_crew("seen", "seen", links=[CrewLink.client("studio", "outbound")])
    registry.register_crew("hidden", "hidden", links=[])
    with ok.Runtime.start(studio=0, middleware=[AclMiddleware(RestrictiveCrewLinkPolicy(registry))]) as rt:
        assert rt.studio is not None
        for crew in ("seen", "hidden", "seen"):
            rt.agent_events.record(AgentAnswered(crew_id=crew, agent_id="a", at=rt.clock.now(), text="done"))
        status, first = _get(rt.studio, "/api/agents?after=0")
        assert status == 200 and first["kept"] is True and first["last_seq"] == 3
        events = [decode_agent_event(e) for e in first["events"]]
        assert [(e.seq, e.crew_id) for e in events] == [(1, "seen"), (3, "seen")]  # the ACL hides "hidden"
        rt.agent_events.record(AgentAnswered(crew_id="seen", agent_id="a", at=rt.clock.now()))
        status, second = _get(rt.studio, "/api/agents?after=3")
        assert [e["seq"] for e in second["events"]] == [4] and second["events"][0]["kind"] == "agent_answered"
        status, refused = _get(rt.studio, "/api/agents?after=-1")
        assert status == 400 and "whole number" in refused["error"]["message"]


def _answered(rt: ok.Runtime, journal: AgentEventJournal, crew: str, n: int) -> None:
    journal.record(AgentAnswered(crew_id=crew, agent_id="a", at=rt.clock.now(), text=f"answer {n}"))


def test_a_durable_runtime_keeps_its_agent_events_for_orkeon_studio_store(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    with ok.Runtime.start(store=str(db)) as rt:
        call = {"call_id": rt.agent_events.next_call_id(), "crew_id": "desk", "agent_id": "clerk", "turn": 0}
        started = ModelCallStarted(**call, model="m", provider="scripted", started_at=rt.clock.now())
        rt.agent_events.record(started)
        _answered(rt, rt.agent_events, "desk", 1)
        wait_until(lambda: len(StoreFileSource(db).agent_events(0)["events"]) == 2, what="the events stored")
    read = StoreFileSource(db).agent_events(0)  # the runtime is gone: the store still has them
    assert read["kept"] is True and read["last_seq"] == 2
    first, second = read["events"]
    assert first["kind"] == "model_call_started" and first["call_id"].endswith("/call-1")
    answered = decode_agent_event(second)
    assert isinstance(answered, AgentAnswered) and (answered.crew_id, answered.text) == ("desk", "answer 1")
    server = StudioServer(StoreFileSource(db))
    try:
        status, body = _get(server, "/api/agents?after=1")
        assert status == 200 and [e["kind"] for e in body["events"]] == ["agent_answered"]
    finally:
        server.stop()


def test_the_store_keeps_only_the_most_recent_agent_events(tmp_path: Path) -> None:
    db = tmp_path / "bounded.db"
    with ok.Runtime.start(store=str(db)) as rt:
        journal = AgentEventJournal()
        AgentEventRecorder(rt.hub.writer, keep=10).attach(journal)  # type: ignore[attr-defined]
        for n in range(50):
            _answered(rt, journal, "busy", n)
        wait_until(lambda: StoreFileSource(db).agent_events(0)["last_seq"] == 50, what="all 50 written")
    events = StoreFileSource(db).agent_events(0)["events"]
    assert [e["text"] for e in events] == [f"answer {n}" for n in range(40, 50)]
