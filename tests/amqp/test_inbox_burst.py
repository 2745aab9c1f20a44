"""Many crews starting at once on one fleet host: every one opens its inbox (declared,
bound, consumed: the broker counts its consumer) and becomes ready (waiting for a
message), however long the burst keeps the broker busy. Their declarations are batched
and the bound on each opening is the broker's silence, not the queue of openings ahead
of it (:mod:`orkeon_actors.fleet.inbox_batch`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orkeon_actors.bench.lifecycle import FACTORIES
from orkeon_actors.crew import CrewStatus
from orkeon_actors.lifecycle import CrewSupervisor
from orkeon_actors.testing import wait_until

from .fleet import fleet_keys, start_host

pytestmark = pytest.mark.rabbitmq

CREWS = 400
"""Each crew's inbox costs a declaration, a binding and a consumer's channel: 400 of them
take the broker several seconds (about 10 ms each on a 2-core machine), well past the
two-second bound given to each opening below."""


def test_a_burst_of_crews_starting_together_all_open_their_inboxes(vhost: str, tmp_path: Path) -> None:
    rt = start_host(vhost, "burst", tmp_path / "burst.db", fleet_keys(["burst"]), connect_timeout=2.0)
    supervisor = CrewSupervisor(rt, factories=FACTORIES)
    try:
        crews = [f"burst{i}" for i in range(CREWS)]
        for crew in crews:
            supervisor.spawn("forever", crew)
        waiting: set[str] = set()

        def all_waiting() -> bool:
            for crew in crews:
                if crew in waiting:
                    continue
                status = supervisor.status(crew)
                if status is CrewStatus.FAILED:
                    pytest.fail(f"crew {crew} failed while the burst opened its inbox: {supervisor.outcome(crew)}")
                if status is CrewStatus.WAITING:
                    waiting.add(crew)
            return len(waiting) == len(crews)

        wait_until(all_waiting, timeout=300, what=f"all {CREWS} crews waiting for a message")
        consumers = _consumers(vhost)
        assert all(consumers.get(f"inbox.agent://{crew}/a") == 1 for crew in crews), {
            crew: consumers.get(f"inbox.agent://{crew}/a")
            for crew in crews
            if consumers.get(f"inbox.agent://{crew}/a") != 1
        }
    finally:
        supervisor.stop(timeout=0)
        rt.stop()


def _consumers(vhost: str) -> dict[str, int]:
    """Consumers per queue of ``vhost``, as the broker counts them."""
    listed = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "-p", vhost, "--no-table-headers", "name", "consumers"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return {name: int(count) for name, count in (line.rsplit(None, 1) for line in listed.splitlines() if line.strip())}
