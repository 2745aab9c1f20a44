"""``orkeon bench lifecycle --soak SECONDS``: a supervisor under churn, its memory over
time (Orkeon EventHub & Crew Lifecycle specification, §7, §11.4).

A :class:`~orkeon_actors.lifecycle.CrewSupervisor` on a durable store (a temporary
file) runs a loop for ``SECONDS``: each round spawns three crews, each one agent on
``receive_message``:

* a *finisher*, posted ``"finish"``: it answers and completes;
* a *failer*, posted ``"fail"``: its model raises, the crew fails;
* a *sleeper*, put to sleep at once; the sleeper put to sleep ``asleep`` rounds earlier
  is posted ``"finish"``: it wakes and completes (so ``asleep`` crews sleep at a time).

Each round waits for its crews to finish, so at most ``asleep + 3`` crews are live or
asleep at once, while thousands come and go. Every ``every`` seconds a sample records
the resident set (``VmRSS``), the sizes of the supervisor's maps
(:meth:`CrewSupervisor.bookkeeping`) and the store's bookkeeping rows
(``processed_messages``, ``mailbox_marks``, ``cursor_events``, snapshots of sleeping
and of failed crews, outcomes, registered mailboxes, kept posts) and the durable hub's
own per-mailbox maps (``hub_*``). A supervisor that holds bounded memory shows flat maps
(bounded by the crews live, ``finished_memory`` and the patterns of sleeping crews) and
an RSS that stops growing once the allocator's pools are warm. Failed crews' snapshots
and finished crews' outcomes are store rows kept for their retention
(``PurgePolicy.failed_retention``, ``outcome_retention``), then purged: they grow with
the failure and completion rate until then, by policy.
"""

from __future__ import annotations

import shutil
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from orkeon_actors.bench.context import scratch_directory
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.errors import CrewFailedError
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.runtime import Runtime
from orkeon_actors.store.durable_hub import SqliteEventHub
from orkeon_actors.testing import wait_until

__all__ = ["SoakSample", "rss_mb", "run_soak"]

_ROWS = {
    "processed_messages": "SELECT count(*) FROM processed_messages",
    "mailbox_marks": "SELECT count(*) FROM mailbox_marks",
    "cursor_events": "SELECT count(*) FROM cursor_events",
    "asleep_snapshots": "SELECT count(*) FROM crew_snapshots WHERE state = 'Asleep'",
    "failed_snapshots": "SELECT count(*) FROM crew_snapshots WHERE state = 'Failed'",
    "crew_outcomes": "SELECT count(*) FROM crew_outcomes",
    "mailbox_registry": "SELECT count(*) FROM mailbox_registry",
    "mailboxes": "SELECT count(*) FROM mailboxes",
}


@attrs.frozen
class SoakSample:
    """One sample of a soak run: seconds since it started, crews finished so far, the
    resident set in MB, the supervisor's map sizes and the store's bookkeeping rows."""

    at: float
    finished: int
    rss_mb: float
    maps: dict[str, int]
    rows: dict[str, int]


def rss_mb() -> float:
    """This process's resident set (``VmRSS``), in MB; 0 where ``/proc`` has none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0


class FailOnPurpose(RuntimeError):
    """The failer crew's model raising, as a crew whose model breaks."""


def _policy(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1] if request.messages else None
    if last is not None and last.role == "tool":
        if '"fail"' in last.content:
            raise FailOnPurpose("the soak's failer crew fails on purpose")
        if '"finish"' in last.content:
            return respond("done")
    return call("receive_message", {"wait_forever": True})


def _crew(_crew_id: Any) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel(policy=_policy))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("t", agent.agent_id)]))


def run_soak(
    seconds: float,
    *,
    every: float = 1.0,
    asleep: int = 20,
    finished_memory: int = 100,
    directory: str | None = None,
    report: Callable[[SoakSample], None] | None = None,
    rounds: int | None = None,
) -> list[SoakSample]:
    """Run the churn for ``seconds`` (at least one round), or exactly ``rounds`` rounds
    with a sample after each when given; return the samples (the first before any crew,
    the last after the final round), each also given to ``report`` as it is taken."""
    scratch = Path(directory) if directory is not None else Path(scratch_directory("orkeon-bench-soak-"))
    samples: list[SoakSample] = []
    try:
        with Runtime.start(store=str(scratch / "soak.db")) as rt:
            hub = rt.hub
            if not isinstance(hub, SqliteEventHub):
                raise TypeError("the soak runs on a durable store")
            sup = CrewSupervisor(rt, factories={"crew": _crew}, finished_memory=finished_memory)
            client = rt.hub.bind("soak", "driver")
            started = time.monotonic()
            finished = 0

            def sample() -> None:
                rows = {name: int(hub.readers.query(sql)[0][0]) for name, sql in _ROWS.items()}
                maps = sup.bookkeeping()
                store = hub.mailbox_store
                maps.update(
                    hub_live_mailboxes=len(store.live),
                    hub_parked_mailboxes=len(store.parked),
                    hub_deferred_ledgers=len(store.deferred),
                )
                taken = SoakSample(round(time.monotonic() - started, 3), finished, rss_mb(), maps, rows)
                samples.append(taken)
                if report is not None:
                    report(taken)

            sample()
            sleepers: deque[str] = deque()
            next_sample = started + every
            round_no = 0
            try:
                while (
                    (round_no < rounds)
                    if rounds is not None
                    else (round_no == 0 or time.monotonic() - started < seconds)
                ):
                    ids = [f"{kind}-{round_no}" for kind in ("finisher", "failer", "sleeper")]
                    for crew in ids:
                        sup.spawn("crew", crew)
                    for crew in ids:  # its mailbox is registered once it waits
                        _wait_waiting(sup, crew)
                    finisher, failer, sleeper = ids
                    client.post(f"agent://{finisher}/a", "finish")
                    client.post(f"agent://{failer}/a", "fail")
                    waking = sleepers.popleft() if len(sleepers) >= asleep else None
                    if waking is not None:
                        client.post(f"agent://{waking}/a", "finish")  # wakes it: it completes
                    sup.wait_finished(finisher, timeout=60)
                    try:
                        sup.wait_finished(failer, timeout=60)
                    except CrewFailedError:
                        pass  # what the failer is for
                    if waking is not None:
                        sup.wait_finished(waking, timeout=60)
                    if not sup.sleep(sleeper):
                        raise RuntimeError(f"soak crew {sleeper} refused to sleep while waiting")
                    sleepers.append(sleeper)
                    finished += 2 + (waking is not None)
                    round_no += 1
                    if rounds is not None or time.monotonic() >= next_sample:
                        sample()
                        next_sample += every
            finally:
                sample()
                sup.stop()
    finally:
        if directory is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return samples


def _wait_waiting(sup: CrewSupervisor, crew: str) -> None:
    wait_until(lambda: sup.status(crew) is CrewStatus.WAITING, what=f"soak crew {crew} waiting")
