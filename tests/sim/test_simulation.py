"""The simulation harness: determinism, virtual time, snapshots of real runs."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orkeon_actors.crew import from_json, to_json
from orkeon_actors.crew.snapshot import SnapshotVersionError, from_dict, register_migrator, to_dict, unregister_migrator
from orkeon_actors.sim import Simulation
from orkeon_actors.sim.examples import EXAMPLES, run_example


def _trace(seed: int) -> list[tuple[float, str, str, str, str]]:
    with Simulation(seed=seed) as sim:
        for build in EXAMPLES.values():
            build(sim)
        result = sim.run()
        assert result.all_completed
        return sim.trace.canonical()


def test_same_seed_same_trace() -> None:
    first = _trace(3)
    assert first == _trace(3)
    assert len(first) > 100


def test_run_stops_at_the_virtual_deadline() -> None:
    with Simulation() as sim:
        crew = EXAMPLES["sequential"](sim)
        result = sim.run(until=30)
        assert result.virtual_time == 30
        assert result.crews[crew][0].value == "waiting_for_message"
        snap = sim.snapshot(crew)
        assert len(snap.pending_waits) == 1 and snap.pending_waits[0].expires_at is not None


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(EXAMPLES)), until=st.sampled_from([0.5, 30.0, 3600.0]), seed=st.integers(0, 5))
def test_snapshots_of_real_runs_round_trip(name: str, until: float, seed: int) -> None:
    sim, crew = run_example(name, seed=seed, until=until)
    try:
        snap = sim.snapshot(crew)
        assert from_json(to_json(snap)) == snap
        assert from_dict(to_dict(snap)) == snap
    finally:
        sim.stop()


def test_schema_versions_and_migrators() -> None:
    sim, crew = run_example("graph")
    try:
        data = to_dict(sim.snapshot(crew))
    finally:
        sim.stop()
    newer = {**data, "schema_version": 99}
    try:
        from_dict(newer)
    except SnapshotVersionError as exc:
        assert "newer" in str(exc)
    else:
        raise AssertionError("a newer snapshot must be refused")
    old = {**data, "schema_version": 0, "crew_name": data["name"]}
    del old["name"]
    try:
        from_dict(old)
    except SnapshotVersionError as exc:
        assert "register_migrator(0)" in str(exc)
    else:
        raise AssertionError("an old snapshot without a migrator must be refused")

    @register_migrator(0)
    def rename(d: dict[str, object]) -> dict[str, object]:
        d["name"] = d.pop("crew_name")
        d["schema_version"] = 1
        return d

    try:
        assert from_dict(old) == from_dict(data)
    finally:
        unregister_migrator(0)
