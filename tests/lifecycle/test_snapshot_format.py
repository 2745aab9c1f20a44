"""The compact snapshot text (snapshot ``schema_version`` 3): defaults left out, no
whitespace, and stores written by the previous release (version 2, every field written)
still wake and complete."""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from orkeon_actors.bench import lifecycle as bench
from orkeon_actors.crew import from_json, to_json
from orkeon_actors.crew.snapshot import SCHEMA_VERSION
from orkeon_actors.lifecycle import CrewSupervisor, LifecycleState
from orkeon_actors.runtime import Runtime
from orkeon_actors.testing import wait_until

WAIT_ID = "01M8S53MW5F6RP96HN1M76JD0M"

V2_BODY = (
    '{"agents": [{"agent_id": "a", "budget": {"cost_used": 0.0, "exhausted_reason": null, "max_cost": null, '
    '"max_tokens": null, "max_tool_calls": null, "max_wall_time": null, "tokens_used": 10, "tool_calls_used": 1, '
    '"wall_time_used": 0.009503160000008393}, "conversation": [{"content": "{\\"previous\\": [], \\"task\\": '
    '\\"wait\\"}", "name": null, "role": "user", "tool_call_id": null, "tool_calls": []}, {"content": "", '
    '"name": null, "role": "assistant", "tool_call_id": null, "tool_calls": [{"arguments": '
    '"{\\"wait_forever\\":true}", "id": "call-0-0", "name": "receive_message"}]}], "cursors": [], "failure": null, '
    '"inbox": [], "pending": {"call": {"arguments": "{\\"wait_forever\\":true}", "id": "call-0-0", "name": '
    '"receive_message"}, "delegation_id": null, "wait": {"expires_at": null, "kind": {"address": '
    '"agent://zzbenchtemplatezz/a", "kind": "on_mailbox"}, "started_at": "2026-12-01T15:55:53.093712Z", '
    '"wait_id": "01M8S53MW5F6RP96HN1M76JD0M"}}, "queued_calls": [], "role": "", "status": "waiting_for_message", '
    '"task": {"origin": "orchestration", "prompt": "{\\"previous\\": [], \\"task\\": \\"wait\\"}", "task_id": '
    '"task-0"}, "turns": 1}], "budget": {"cost_used": 0.0, "exhausted_reason": null, "max_cost": null, '
    '"max_tokens": null, "max_tool_calls": null, "max_wall_time": null, "tokens_used": 10, "tool_calls_used": 1, '
    '"wall_time_used": 0.0}, "failure": null, "id": "zzbenchtemplatezz", "mailboxes": [], "mode": "sequential", '
    '"name": "forever", "orchestration": {"completed": [], "current_task_index": 0, "mode": "sequential"}, '
    '"pending_waits": [{"expires_at": null, "kind": {"address": "agent://zzbenchtemplatezz/a", "kind": '
    '"on_mailbox"}, "started_at": "2026-12-01T15:55:53.093712Z", "wait_id": "01M8S53MW5F6RP96HN1M76JD0M"}], '
    '"result": null, "schema_version": 2, "snapshot_at": "2026-12-01T15:55:53.094072Z", "status": '
    '"waiting_for_message"}'
)
"""A sleeping crew's snapshot exactly as the previous release wrote it (the lifecycle
bench's ``forever`` crew, parked on ``receive_message``)."""

V2_TEMPLATE = bench.Template(
    snapshot=(bench.MARKER, V2_BODY.encode(), "sequential", 2, "2026-12-01T15:55:53.094072Z", "Asleep"),
    waits=(
        (
            WAIT_ID,
            bench.MARKER,
            "OnMailbox",
            None,
            None,
            f"agent://{bench.MARKER}/a",
            None,
            None,
            "2026-12-01T15:55:53.093712Z",
            None,
        ),
    ),
    registry=(
        (f"crew://{bench.MARKER}", "2026-12-01T15:55:53.084968Z"),
        (f"agent://{bench.MARKER}/a", "2026-12-01T15:55:53.084968Z"),
    ),
    expires_at=None,
)


def test_a_version_2_snapshot_loads_and_is_written_back_compact() -> None:
    snapshot = from_json(V2_BODY)
    assert snapshot.schema_version == SCHEMA_VERSION == 3
    text = to_json(snapshot)
    data = json.loads(text)
    assert from_json(text) == snapshot
    assert data["schema_version"] == 3  # always written, though it is the field's default
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"))  # no whitespace between tokens
    assert len(text) < 0.7 * len(V2_BODY)
    agent = data["agents"][0]
    assert "inbox" not in agent and "cursors" not in agent and "failure" not in agent  # defaults left out
    assert set(agent["budget"]) == {"tokens_used", "tool_calls_used", "wall_time_used"}  # the non-zero usage
    assert agent["pending"]["wait"]["expires_at"] is None  # no default (Forever is said): written
    assert data["mailboxes"] == [] and data["mode"] == "sequential"
    assert "pending_waits" not in data  # the agent's pending wait, written once
    assert snapshot.pending_waits == (snapshot.agents[0].pending.wait,)  # type: ignore[union-attr]


def test_pending_waits_that_are_not_the_agents_are_written() -> None:
    snapshot = from_json(V2_BODY)
    other = attrs.evolve(snapshot.pending_waits[0], wait_id="01M8S53MW5F6RP96HN1M76JD0N")
    for waits in ((), (snapshot.pending_waits[0], other)):
        changed = attrs.evolve(snapshot, pending_waits=waits)
        data = json.loads(to_json(changed))
        assert len(data["pending_waits"]) == len(waits)
        assert from_json(to_json(changed)) == changed


def test_a_store_of_version_2_snapshots_boots_and_its_crews_wake_and_complete(tmp_path: Path) -> None:
    db = str(tmp_path / "v2.db")
    bench.populate(db, V2_TEMPLATE, ["old1", "old2"])
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=bench.FACTORIES)
    try:
        assert sup.booted_asleep == 2
        loaded = sup.store.load("old1")
        assert loaded is not None and loaded.schema_version == 3 and str(loaded.id) == "old1"
        delivered = bench.DELIVERIES.expect("old1")
        rt.hub.bind("test", "poster").post("agent://old1/a", "wake up")
        assert delivered.wait(10)
        wait_until(lambda: sup.state("old1") is LifecycleState.COMPLETED, what="old1 completed")
        assert bench.DELIVERIES.at["old1"][2] is False  # woken by the post, not a timeout
        assert sup.state("old2") is LifecycleState.ASLEEP
    finally:
        sup.stop()
        rt.stop()
