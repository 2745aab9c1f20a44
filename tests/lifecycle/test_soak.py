"""A supervisor under churn holds bounded maps (spec §7, §11.4): crews created, put to
sleep, woken, finishing and failing round after round leave every map of the supervisor
and of the durable hub bounded by the crews live or asleep and by ``finished_memory``,
not by how many came and went. The long run with RSS: ``orkeon bench lifecycle --soak``."""

from __future__ import annotations

from pathlib import Path

from orkeon_actors.bench.soak import run_soak

ASLEEP = 4
FINISHED_MEMORY = 10
ROUNDS = 30


def test_the_maps_stay_bounded_while_crews_come_and_go(tmp_path: Path) -> None:
    samples = run_soak(0, rounds=ROUNDS, asleep=ASLEEP, finished_memory=FINISHED_MEMORY, directory=str(tmp_path))
    last = samples[-1]
    assert last.finished == 2 * ROUNDS + (ROUNDS - ASLEEP)  # far more crews than any bound below
    live_at_most = 4  # a round's three crews and the sleeper it wakes
    for sample in samples:
        maps, rows = sample.maps, sample.rows
        assert maps["outcomes"] <= FINISHED_MEMORY
        for name in ("entries", "live", "status", "idle_touched", "idle_timeouts", "idle_timers"):
            assert maps[name] <= live_at_most, (name, sample)
        for name in ("activating", "handed", "kept_read", "durable_live", "live_kept", "in_flight"):
            assert maps[name] <= live_at_most, (name, sample)
        assert maps["expiries_held"] == maps["expiries_cancelled"] == 0  # no finite wait
        assert maps["hub_parked_mailboxes"] <= 2 * (ASLEEP + 1)  # agent and crew mailbox of each sleeper
        assert maps["hub_deferred_ledgers"] <= live_at_most
        assert maps["hub_live_mailboxes"] <= 2 * live_at_most
        assert rows["asleep_snapshots"] <= ASLEEP + 1
        assert rows["processed_messages"] == rows["cursor_events"] == 0
        assert rows["mailbox_marks"] <= ASLEEP + 1
        assert rows["mailboxes"] <= live_at_most
    assert last.maps["outcomes"] == FINISHED_MEMORY  # the bound was reached, and held
