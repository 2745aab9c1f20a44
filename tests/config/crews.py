"""The six example crews written with the Python builder (the parity tests compare them
with ``examples/crews/*.yaml`` and with the TypeScript crews of ``ts/test/crews``)."""

from __future__ import annotations

from collections.abc import Callable

import orkeon_actors as ok
from orkeon_actors.crew import call

EXAMPLES_DIR = "examples/crews"


def sequential() -> ok.CrewBlueprint:
    return (
        ok.CrewBuilder()
        .name("newsroom")
        .description("A writer drafts, waits for a review request, an editor edits.")
        .idle_timeout("300s")
        .agent(
            "writer",
            role="writer",
            model=ok.scripted(
                [
                    call("publish_event", {"topic": "drafts.ready", "payload": {"title": "Actors"}}),
                    call("wait_for_event", {"topic": "reviews.requested", "timeout_ms": 60_000}),
                    "draft: actors are data",
                ]
            ),
        )
        .agent("editor", role="editor", model=ok.scripted(["edited(draft: actors are data)"]))
        .sequential([("write a draft", "writer"), ("edit the draft", "editor")])
        .publishes("drafts.ready")
        .build()
    )


def hierarchical() -> ok.CrewBlueprint:
    plan = '{"subtasks": [{"worker": "r1", "task": "prices"}, {"worker": "r2", "task": "reviews"}]}'
    return (
        ok.CrewBuilder()
        .name("research")
        .agent("manager", model=ok.scripted([plan, "report: r1 found prices; r2 found reviews"]))
        .agent("r1", model=ok.scripted(["r1 found prices"]))
        .agent("r2", model=ok.scripted(["r2 found reviews"]))
        .hierarchical("manager", ["r1", "r2"], "compare laptops")
        .build()
    )


def parallel() -> ok.CrewBlueprint:
    return (
        ok.CrewBuilder()
        .name("scoring")
        .agent("fast", model=ok.scripted(["score 7"]))
        .agent(
            "slow",
            model=ok.scripted([call("wait_for_event", {"topic": "market.open", "timeout_ms": 30_000}), "score 5"]),
        )
        .agent("steady", model=ok.scripted(["score 7"]))
        .parallel(
            [("b1", "fast", "score"), ("b2", "slow", "score"), ("b3", "steady", "score")],
            join="quorum",
            quorum=2,
            aggregation="majority",
        )
        .build()
    )


def consensual() -> ok.CrewBlueprint:
    return (
        ok.CrewBuilder()
        .name("council")
        .agent("v1", model=ok.scripted(["approve fine", "approve looks good now"]))
        .agent("v2", model=ok.scripted(["reject too costly", "approve looks good now"]))
        .agent("v3", model=ok.scripted(["reject no tests", "approve looks good now"]))
        .agent("proposer", model=ok.scripted(["ship v2 with tests, half the cost"]))
        .consensual(["v1", "v2", "v3"], "ship v1", rule="supermajority", max_rounds=3, proposer="proposer")
        .build()
    )


def graph() -> ok.CrewBlueprint:
    return (
        ok.CrewBuilder()
        .name("pipeline")
        .agent("drafter", model=ok.scripted(['{"quality": 1}', '{"quality": 2}', '{"quality": 3}']))
        .agent("reviewer", model=ok.scripted(['{"reviewed": true}'] * 3))
        .agent("publisher", model=ok.scripted(['{"published": true}']))
        .graph(
            {"draft": "drafter", "review": "reviewer", "publish": "publisher"},
            [
                ("draft", "review"),
                ("review", "draft", {"var": "quality", "op": "<", "value": 3}),
                ("review", "publish"),
                ("publish", "__end__"),
            ],
            start="draft",
            max_cycles=5,
        )
        .build()
    )


def autonomous() -> ok.CrewBlueprint:
    return (
        ok.CrewBuilder()
        .name("startup")
        .agent(
            "root",
            budget={"max_tool_calls": 10},
            model=ok.scripted([call("delegate", {"role": "planner", "task": "plan the feature"}), "feature shipped"]),
        )
        .autonomous(
            "root",
            "build the feature",
            max_depth=2,
            roles={
                "planner": ok.scripted(
                    [call("delegate", {"role": "coder", "task": "write it"}), "plan done"], per_task=True
                ),
                "coder": ok.scripted(["code written"]),
            },
        )
        .build()
    )


BUILDERS: dict[str, Callable[[], ok.CrewBlueprint]] = {
    "sequential": sequential,
    "hierarchical": hierarchical,
    "parallel": parallel,
    "consensual": consensual,
    "graph": graph,
    "autonomous": autonomous,
}
