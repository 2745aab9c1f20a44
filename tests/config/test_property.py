"""Hypothesis: blueprints generated from the schema's shapes round-trip
YAML -> blueprint -> YAML, and the documents they write are schema-valid."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.config.validate import schema_issues

ids = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)
words = st.from_regex(r"[a-z][a-z0-9_-]{0,6}", fullmatch=True)
topics = st.lists(words, min_size=1, max_size=3).map(".".join)
texts = st.text(max_size=20)
durations = st.one_of(
    st.integers(1, 10_000),
    st.sampled_from(["500ms", "30s", "5m", "1h", "2d", "PT5M", "P1DT2H", "PT0.5S", "1.5s"]),
)
budgets = st.fixed_dictionaries(
    {},
    optional={
        "max_tokens": st.integers(1, 10**6),
        "max_tool_calls": st.integers(1, 100),
        "max_wall_time": durations,
        "max_cost": st.floats(0.01, 100, allow_nan=False),
    },
)
steps = st.one_of(
    texts,
    st.fixed_dictionaries({"text": texts}, optional={"tokens": st.integers(0, 100)}),
    st.fixed_dictionaries(
        {"call": st.sampled_from(["publish_event", "wait_for_event"])},
        optional={"arguments": st.dictionaries(words, st.integers(-(10**38), 10**38) | texts, max_size=2)},
    ),
)
models = st.fixed_dictionaries(
    {"provider": st.just("scripted"), "script": st.lists(steps, min_size=1, max_size=3)},
    optional={"per_task": st.booleans()},
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(ids)
    agent_ids = draw(st.lists(ids, min_size=2, max_size=4, unique=True))
    agents = [
        {
            "id": a,
            "model": draw(models),
            **draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "role": texts,
                        "instructions": texts,
                        "budget": budgets,
                        "max_turns": st.integers(1, 99),
                        "hub_tools": st.booleans(),
                        "cursors": st.fixed_dictionaries({}, optional={"max_cursors": st.integers(1, 9)}),
                    },
                )
            ),
        }
        for a in agent_ids
    ]
    agent = st.sampled_from(agent_ids)
    mode = draw(st.sampled_from(["sequential", "hierarchical", "parallel", "consensual", "graph", "autonomous"]))
    orchestration: dict[str, Any]
    if mode == "sequential":
        orchestration = {
            "tasks": draw(st.lists(st.fixed_dictionaries({"description": texts, "agent": agent}), min_size=1))
        }
    elif mode == "hierarchical":
        orchestration = {"manager": agent_ids[0], "workers": agent_ids[1:], "goal": draw(texts)}
    elif mode == "parallel":
        branches = [{"id": f"b{i}", "agent": a, "task": draw(texts)} for i, a in enumerate(agent_ids)]
        join = draw(st.sampled_from(["all", "any", "quorum"]))
        orchestration = {"branches": branches, "join": join, "aggregation": draw(st.sampled_from(["concat", "json"]))}
        if join == "quorum":
            orchestration["quorum"] = draw(st.integers(1, len(branches)))
    elif mode == "consensual":
        orchestration = {
            "voters": agent_ids[1:],
            "proposal": draw(texts),
            "rule": draw(st.sampled_from(["majority", "supermajority", "unanimity"])),
            "max_rounds": draw(st.integers(1, 5)),
            "proposer": agent_ids[0],
        }
    elif mode == "graph":
        nodes = {f"n{i}": a for i, a in enumerate(agent_ids)}
        value = st.one_of(st.integers(-5, 5), st.booleans(), texts, st.none())
        when = st.fixed_dictionaries({"var": words, "op": st.sampled_from(["==", "!=", "<", ">="]), "value": value})
        edges = [
            {
                "from": f"n{i}",
                "to": f"n{i + 1}" if i + 1 < len(nodes) else "__end__",
                **draw(st.just({}) | when.map(lambda w: {"when": w})),
            }
            for i in range(len(nodes))
        ]
        orchestration = {"nodes": nodes, "edges": edges, "start": "n0", "max_cycles": draw(st.integers(1, 20))}
    else:
        orchestration = {
            "root": agent_ids[0],
            "task": draw(texts),
            "roles": draw(st.dictionaries(words, models, max_size=2)),
        }
    document: dict[str, Any] = {"name": name, "agents": agents, "orchestration": {"mode": mode, **orchestration}}
    extras = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "description": texts,
                "idle_timeout": durations,
                "budget": budgets,
                "links": st.none()
                | st.lists(
                    st.fixed_dictionaries(
                        {
                            "to": ids | ids.map(lambda n: f"client:{n}"),
                            "direction": st.sampled_from(["outbound", "inbound", "bidirectional"]),
                        },
                        optional={"allowed_topics": st.lists(topics, max_size=2)},
                    ),
                    max_size=3,
                    unique_by=lambda link: link["to"],  # a peer named twice is refused (one link per peer)
                ),
                "event": st.fixed_dictionaries(
                    {},
                    optional={
                        "publish": st.lists(
                            st.fixed_dictionaries({"topic": topics}, optional={"target_crew_id": ids}), max_size=2
                        ),
                        "subscribe": st.lists(
                            st.fixed_dictionaries(
                                {"topic": topics, "deliver_to": agent.map(lambda a: f"agent://{name}/{a}")}
                            ),
                            max_size=2,
                        ),
                        "undeclared_publish": st.sampled_from(["warn", "refuse"]),
                    },
                ),
            },
        )
    )
    document.update(extras)
    return document


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_generated_blueprints_round_trip_yaml_blueprint_yaml(document: dict[str, Any]) -> None:
    assert schema_issues(document) == []
    bp = ok.CrewBlueprint.from_document(document)
    text = bp.to_yaml()
    again = ok.CrewBlueprint.from_yaml(text)
    assert again == bp
    assert again.to_yaml() == text
    assert schema_issues(bp.to_document()) == []


@settings(max_examples=200, deadline=None)
@given(text=st.text())
@example(text="\x85")  # NEL, written raw in quotes, read back as a space (before)
@example(text="a\u2028b\u2029")
@example(text="\ufeff\x00\x7f\U0001f600 \t")
def test_every_string_round_trips_through_to_yaml(text: str) -> None:
    """Any string hypothesis produces, in free-text fields, reads back as written."""
    model = {"provider": "scripted", "script": [text, {"text": text}]}
    bp = ok.CrewBlueprint.from_document(
        {
            "name": "c",
            "description": text,
            "agents": [{"id": "a", "role": text, "instructions": text, "model": model}],
            "orchestration": {"mode": "sequential", "tasks": [{"description": text, "agent": "a"}]},
        }
    )
    assert ok.CrewBlueprint.from_yaml(bp.to_yaml()) == bp


@settings(max_examples=200, deadline=None)
@given(st.floats(0.001, 10**7, allow_nan=False, allow_infinity=False) | st.integers(1, 10**7))
def test_durations_round_trip(seconds: float) -> None:
    text = ok.config.format_duration(seconds)
    assert ok.config.parse_duration(text) == seconds
