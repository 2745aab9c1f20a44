"""The agent view's read: the runtime's agent events after a cursor, as the wire JSON,
history included, refused crews left out, a bad cursor a JSON 400."""

from __future__ import annotations

import http.client
import json
from typing import Any

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink, RestrictiveCrewLinkPolicy
from orkeon_actors.model.agent_events import AgentAnswered
from orkeon_actors.studio import StudioServer
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
