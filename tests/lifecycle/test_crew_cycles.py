"""A finished crew is freed by reference counting: no cycle left for the collector."""

from __future__ import annotations

import gc

from orkeon_actors.bench import lifecycle as bench
from orkeon_actors.crew import CrewActor, CrewStatus
from orkeon_actors.testing import wait_until

from .conftest import Env


def test_finished_crews_leave_no_cycle_for_the_collector(env: Env) -> None:
    """A woken crew that completes is freed by reference counting: its actor, agents,
    budgets and waits hold no reference cycle that only a full collection frees (a
    burst of expiries would otherwise pile up whole crews for the collector)."""
    finite = bench.capture_template(str(env.db.parent / "finite.db"), bench.PAIR_NAME)
    crews = [f"c{i}" for i in range(5)]
    bench.populate(str(env.db), finite, crews, expires_at=env.clock.now())
    env.factories.update(bench.FACTORIES)
    gc.collect()
    gc.disable()
    try:
        sup = env.boot()
        for crew in crews:
            assert sup.wait_finished(crew, timeout=30).status is CrewStatus.COMPLETED
        wait_until(lambda: all(sup.ref(c) is None for c in crews), what="their actors released")
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    left = kinds & {CrewActor.__name__, "AgentRuntime", "Budget", "CancelToken", "AsyncWait", "Waiter", "ActorInbox"}
    assert not left, f"cycles left by finished crews: {sorted(left)}"
