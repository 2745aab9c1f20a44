"""``SnapshotActivator`` (spec §3.3 ``CrewActivator``, §7.3): a sleeping crew rebuilt
from its factory and its snapshot, the trigger delivered, nothing written."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import CrewStatus, call, query_crew, respond
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.lifecycle import CrewActivator, CrewBlueprint
from orkeon_actors.lifecycle.activation import SnapshotActivator
from orkeon_actors.model.ids import CrewId
from orkeon_actors.store.crew_states import SqliteCrewStateStore
from orkeon_actors.testing import wait_until

from .conftest import Env
from .test_sleep_wake import _crew


def _topic_crew(_: object) -> CrewBlueprint:
    return _crew(call("wait_for_event", {"topic": "go.*", "timeout_ms": 60_000}), respond("done"))


@pytest.fixture
def asleep(env: Env) -> Iterator[tuple[Env, SnapshotActivator]]:
    """Crew ``c1`` asleep on a ``wait_for_event("go.*", 60 s)``; a runtime without a
    supervisor on the same store, and an activator on it."""
    env.factories["t"] = _topic_crew
    sup = env.boot()
    sup.spawn("t", "c1")
    env.settle("c1")
    assert sup.sleep("c1")
    env.shutdown()
    env.rt = ok.Runtime.start(store=str(env.db), clock=env.clock)
    hub = env.rt.hub
    activator = SnapshotActivator(hub, SqliteCrewStateStore(hub), env.factories)
    yield env, activator


def _rows(env: Env) -> tuple[object, ...]:
    hub = env.hub
    return (hub.load_snapshot("c1"), hub.load_pending_waits("c1"))


def test_it_implements_the_activator_port(asleep: tuple[Env, SnapshotActivator]) -> None:
    assert isinstance(asleep[1], CrewActivator)


def test_a_topic_trigger_is_delivered_to_the_restored_agent_and_nothing_is_written(
    asleep: tuple[Env, SnapshotActivator],
) -> None:
    env, activator = asleep
    before = _rows(env)
    trigger = env.hub.bind("p").publish("go.now", {"n": 1})
    crew = activator.activate(CrewId("c1"), trigger)
    assert crew is not None and crew.name == "t"
    try:
        wait_until(lambda: query_crew(crew.ref, "status") is CrewStatus.COMPLETED, what="c1 completed")
        snapshot = query_crew(crew.ref, "snapshot")
        result = json.loads(snapshot.agents[0].conversation[-2].content)
        assert result["timed_out"] is False and result["message"]["payload"] == {"n": 1}
        assert _rows(env) == before  # the activation wrote nothing (the supervisor deletes on completion)
    finally:
        crew.ref.stop()


def test_restore_reports_the_expired_waits_and_the_trigger_it_processes(asleep: tuple[Env, SnapshotActivator]) -> None:
    env, activator = asleep
    [wait] = env.hub.load_pending_waits("c1")
    env.clock.advance(61)
    snapshot = activator.load(CrewId("c1"), None)
    assert snapshot is not None
    crew = activator.build(snapshot.name, CrewId("c1"))
    try:
        trigger = env.hub.bind("p").publish("go.late", 1)
        assert activator.restore(crew, snapshot, trigger) == [wait.wait_id, str(trigger.id)]
    finally:
        crew.ref.stop()


def test_nothing_to_activate_without_a_snapshot_or_for_a_processed_trigger(
    asleep: tuple[Env, SnapshotActivator],
) -> None:
    env, activator = asleep
    assert activator.activate(CrewId("never-slept"), None) is None
    trigger = env.hub.bind("p").publish("go.again", 1)
    env.hub.writer.execute(
        lambda conn: conn.execute(
            "INSERT INTO processed_messages (message_id, crew_id, processed_at) "
            "VALUES (?, 'c1', '2026-01-01T00:00:00Z')",
            (str(trigger.id),),
        )
    )
    assert activator.activate(CrewId("c1"), trigger) is None


def test_a_crew_whose_factory_is_missing_is_refused_with_how_to_fix_it(asleep: tuple[Env, SnapshotActivator]) -> None:
    env, activator = asleep
    env.factories.clear()
    with pytest.raises(InvalidArgumentError, match=r"register_factory\('t', fn\)"):
        activator.activate(CrewId("c1"), None)


def test_a_batch_read_gives_the_snapshot_a_single_read_gives_and_omits_crews_without_one(
    asleep: tuple[Env, SnapshotActivator],
) -> None:
    _, activator = asleep
    texts = activator.read_many([CrewId("c1"), CrewId("nobody")])
    assert set(texts) == {CrewId("c1")}
    assert activator.load(CrewId("c1"), None, texts) == activator.load(CrewId("c1"), None)
    assert activator.load(CrewId("nobody"), None, texts) is None
