"""Running a blueprint: ``start_crew`` on a runtime (with its links reaching the ACL),
the supervisor and the simulation accept it."""

from __future__ import annotations

import json

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, RestrictiveCrewLinkPolicy
from orkeon_actors.crew import CrewActor, CrewStatus, call, query_crew
from orkeon_actors.sim.simulation import Simulation
from orkeon_actors.testing import wait_until


def poster(links: list[dict[str, str]] | None) -> ok.CrewBlueprint:
    builder = (
        ok.CrewBuilder()
        .name("billing-crew")
        .agent(
            "a",
            model=ok.scripted(
                [call("post_message", {"target_mailbox": "agent://fraud-1/scorer", "payload": {"n": 1}}), "sent"]
            ),
        )
        .sequential([("post to fraud", "a")])
    )
    return builder.links(links).build()


def post_result(links: list[dict[str, str]] | None) -> dict[str, object]:
    registry = AclRegistry()
    with ok.Runtime.start(middleware=[AclMiddleware(RestrictiveCrewLinkPolicy(registry))]) as rt:
        registry.register_crew("fraud-crew", "fraud-1")
        box = rt.hub.register_mailbox("agent://fraud-1/scorer")
        ref = ok.start_crew(poster(links), rt, crew_id="billing-1", acl=registry)
        wait_until(lambda: query_crew(ref, "status") is CrewStatus.COMPLETED, what="crew completed")
        [agent] = query_crew(ref, "snapshot").agents
        ref.stop()
        box.close()
    result: dict[str, object] = json.loads(next(m.content for m in agent.conversation if m.role == "tool"))
    return result


def test_a_blueprints_links_reach_the_acl() -> None:
    assert "error" not in post_result([{"to": "fraud-crew", "direction": "outbound"}])
    refused = post_result([])  # links: [] closes the door
    assert refused["error"]["type"] == "EventAclError"  # type: ignore[index]
    refused = post_result([{"to": "audit-crew", "direction": "outbound"}])
    assert refused["error"]["type"] == "EventAclError"  # type: ignore[index]


def test_start_crew_also_begins_a_started_actor_ref() -> None:
    bp = ok.CrewBuilder().name("c").agent("a", model=ok.scripted(["done"])).sequential([("t", "a")]).build()
    with ok.Runtime.start() as rt:
        ref = CrewActor.start(rt.hub, **ok.config.crew_actor_options(bp, ok.CrewId("c-1")))
        assert ok.start_crew(ref) is ref
        wait_until(lambda: query_crew(ref, "status") is CrewStatus.COMPLETED, what="crew completed")
        ref.stop()
    with pytest.raises(TypeError, match="give the Runtime"):
        ok.start_crew(bp)


def test_a_simulation_spawns_a_blueprint_with_deterministic_ids() -> None:
    bp = ok.load_crew("examples/crews/graph.yaml")
    with Simulation(seed=1) as sim:
        assert sim.spawn(bp) == "pipeline-1"
        assert sim.spawn(bp) == "pipeline-2"
        result = sim.run()
    assert result.all_completed
    with Simulation() as sim, pytest.raises(TypeError):
        sim.spawn("pipeline", agents=[])
