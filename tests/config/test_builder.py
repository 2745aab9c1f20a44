"""``CrewBuilder``: links, idle timeout, events and budgets are declarable; bad input
fails with every problem and its pointer."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import CrewLink, Direction
from orkeon_actors.errors import CrewConfigError


def base() -> ok.CrewBuilder:
    return (
        ok.CrewBuilder()
        .name("order-processor")
        .agent("router", model=ok.scripted(["routed"]))
        .sequential([("route the order", "router")])
    )


def test_links_idle_timeout_and_events_are_declarable() -> None:
    bp = (
        base()
        .idle_timeout(timedelta(minutes=5))
        .links(
            [CrewLink("fraud-crew", "bidirectional", ["fraud.check"]), {"to": "client:studio", "direction": "outbound"}]
        )
        .on_event("order.received", "agent://order-processor/router")
        .publishes("order.processed", target_crew_id="billing-crew")
        .publishes("audit.event")
        .undeclared_publish("refuse")
        .budget(max_tokens=1000, max_wall_time="1h")
        .build()
    )
    assert bp.idle_timeout == 300.0
    assert bp.links.declared
    assert bp.links.links == (
        CrewLink("fraud-crew", Direction.BIDIRECTIONAL, ("fraud.check",)),
        CrewLink("client:studio", Direction.OUTBOUND),
    )
    assert [s.deliver_to for s in bp.event.subscribe] == ["agent://order-processor/router"]
    assert [(p.topic, p.target_crew_id) for p in bp.event.publish or ()] == [
        ("order.processed", "billing-crew"),
        ("audit.event", None),
    ]
    assert bp.event.undeclared_publish == "refuse"
    assert bp.budget == ok.config.BudgetSpec(max_tokens=1000, max_wall_time=3600.0)  # type: ignore[arg-type]
    assert ok.CrewBlueprint.from_yaml(bp.to_yaml()) == bp


def test_an_empty_links_list_closes_the_door_and_none_undeclares() -> None:
    assert base().links([]).build().links.declared
    assert not base().links([]).links(None).build().links.declared


def test_the_crew_budget_is_each_agents_default_field_by_field() -> None:
    bp = (
        ok.CrewBuilder()
        .name("c")
        .budget(max_tokens=100, max_tool_calls=5)
        .agent("a", model=ok.scripted(["x"]), budget={"max_tool_calls": 2})
        .agent("b", model=ok.scripted(["y"]))
        .sequential([("t", "a"), ("u", "b")])
        .build()
    )
    a, b = ok.config.build_agents(bp, ok.CrewId("c-1"))
    assert (a.budget.max_tokens, a.budget.max_tool_calls) == (100, 2)
    assert (b.budget.max_tokens, b.budget.max_tool_calls) == (100, 5)


def test_build_reports_every_problem_with_its_pointer() -> None:
    builder = (
        ok.CrewBuilder()
        .name("bad")
        .agent("a", model=ok.scripted(["x"]), max_turns=0)
        .agent("a", model=ok.scripted(["y"]))
        .parallel([("b1", "a", "t")], join="quorum", quorum=3)
    )
    with pytest.raises(CrewConfigError) as caught:
        builder.build()
    assert [i.pointer for i in caught.value.issues] == ["/agents/0/max_turns"]  # type: ignore[attr-defined]
    builder = (
        ok.CrewBuilder()
        .name("bad")
        .agent("a", model=ok.scripted(["x"]))
        .agent("a", model=ok.scripted(["y"]))
        .parallel([("b1", "a", "t")], join="quorum", quorum=3)
        .on_event("x.y", "agent://other-crew/a")
    )
    with pytest.raises(CrewConfigError) as caught:
        builder.build()
    pointers = [i.pointer for i in caught.value.issues]  # type: ignore[attr-defined]
    assert pointers == ["/agents/1/id", "/orchestration/quorum", "/event/subscribe/0/deliver_to"]
    assert "the CrewBuilder crew is not a valid crew (3 problems)" in str(caught.value)


def test_a_tool_name_must_be_given_when_the_crew_is_built() -> None:
    tool = ok.crew.Tool("lookup", "look it up", lambda args: {"found": True})
    bp = (
        ok.CrewBuilder()
        .name("t")
        .agent("a", model=ok.scripted(["x"]), tools=["lookup"])
        .sequential([("t", "a")])
        .build()
    )
    with pytest.raises(CrewConfigError, match="names the tool 'lookup', which was not given"):
        ok.config.build_agents(bp, ok.CrewId("t-1"))
    [agent] = ok.config.build_agents(bp, ok.CrewId("t-1"), {"lookup": tool})
    assert agent.tools == (tool,)


def test_a_blueprint_built_field_by_field_is_checked_by_validate() -> None:
    good = base().build()
    assert good.validate() is good
    import attrs

    broken = attrs.evolve(good, agents=(attrs.evolve(good.agents[0], max_turns=0),))
    with pytest.raises(CrewConfigError, match=r"agents\[0\]\.max_turns: expected a positive integer, got 0"):
        broken.validate()


def test_volatile_cursors_are_declared_in_yaml_or_the_builder_alike(tmp_path: Path) -> None:
    built = (
        ok.CrewBuilder()
        .name("metrics-reader")
        .agent("reader", model=ok.scripted(["ok"]), volatile_cursors=["metrics.#"])
        .sequential([("read", "reader")])
        .build()
    )
    path = tmp_path / "crew.yaml"
    path.write_text(
        "name: metrics-reader\n"
        "agents:\n"
        "  - id: reader\n"
        "    model: {provider: scripted, script: [ok]}\n"
        "    cursors: {volatile: ['metrics.#']}\n"
        "orchestration: {mode: sequential, tasks: [{description: read, agent: reader}]}\n"
    )
    loaded = ok.load_crew(path)
    for bp in (built, loaded):
        [agent] = ok.config.build_agents(bp, ok.CrewId("m-1"))
        assert agent.volatile_cursors == frozenset({"metrics.#"})
    [default] = ok.config.build_agents(base().build(), ok.CrewId("o-1"))
    assert default.volatile_cursors == frozenset()  # every cursor durable unless opted out
