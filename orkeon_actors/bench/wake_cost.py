"""``orkeon bench wakecost``: what the steps every expiry must take cost, one at a time.

A durable timer expiry (issue #8, spec §7.3) wakes a sleeping crew: its snapshot is
read and decoded, the crew is rebuilt from its factory, its mailboxes are reopened, its
agent gets the timeout, and a finished crew's mailboxes are closed. This suite times the
steps that do not depend on what the agent does, each alone (driven from one thread,
no other work running), in process CPU time (so a commit's fsync is not counted), over
``N`` crews of the lifecycle bench's store (one agent parked
on a finite ``receive_message``):

* ``snapshot_read_us``: one ``crew_snapshots`` row read (one query per crew);
* ``snapshot_json_us`` / ``snapshot_structure_us``: its JSON parsed, then structured
  into a ``CrewSnapshot`` by the cattrs converter;
* ``crew_build_us``: the factory called and the crew actor started (``SnapshotActivator.build``);
* ``mailbox_reopen_us``: the crew's two parked mailboxes reopened (no writer);
* ``mailbox_close_us``: both closed and unregistered, those of 64 crews per writer
  transaction (as a burst's group commit would: the least a commit costs per crew);
* ``crew_stop_us``: the crew actor stopped.

``steps_us`` is their sum and ``steps_ceiling_per_s`` the rate those steps alone would
allow on one core (the GIL lets one thread run Python at a time): an upper bound for
``expiries_per_s`` of ``orkeon bench lifecycle`` in this interpreter, which also
restores the agent, runs its model turn, deletes the finished crew and hands work
between threads. Sizes: ``N=2,000``; ``--quick``: ``N=200``.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from orkeon_actors.bench.context import progress, scratch_directory
from orkeon_actors.bench.lifecycle import (
    FACTORIES,
    FINITE_NAME,
    bench_crew_ids,
    capture_template,
    info_logging,
    populate,
)
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.crew.snapshot import CrewSnapshot, from_dict
from orkeon_actors.hub.port import MailboxRegistration
from orkeon_actors.lifecycle import CrewSupervisor
from orkeon_actors.lifecycle.activation import BuiltCrew
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.runtime import Runtime
from orkeon_actors.store import SqliteEventHub
from orkeon_actors.store.records import SnapshotRecord

__all__ = ["bench_wake_cost"]

_STEPS = (
    "snapshot_read_us",
    "snapshot_json_us",
    "snapshot_structure_us",
    "crew_build_us",
    "mailbox_reopen_us",
    "mailbox_close_us",
    "crew_stop_us",
)


_CLOSE_GROUP = 64
"""Crews whose mailboxes are closed in one call (one writer transaction)."""


def _per_crew_us(count: int, step: Callable[[], object]) -> float:
    """The process CPU time ``step`` took (every thread's: a crew's ``on_start`` runs
    on a pool thread), per crew: waiting for the disk is not counted.

    The heap is collected and frozen first (``gc.freeze``), and unfrozen after: the
    step pays for the collections its own allocations cause, not for full collections
    over what the bench holds for the other steps (every crew's rows, dicts, snapshots
    and actors at once, which one expiry never holds). Without this a full collection
    (≈ 60-80 µs per crew here) lands in whichever step crosses CPython's threshold, so a
    step's figure moved with the number of modules imported (see docs/bench.md)."""
    gc.collect()
    gc.freeze()
    try:
        started = time.process_time()
        step()
        return (time.process_time() - started) / count * 1e6
    finally:
        gc.unfreeze()


@register("wakecost")
def bench_wake_cost(quick: bool) -> BenchResult:
    count = 200 if quick else 2_000
    rounds = 1 if quick else 3
    directory = scratch_directory("orkeon-bench-wakecost-")
    runs: list[dict[str, float]] = []
    try:
        with info_logging():
            for index in range(rounds):
                progress(f"round {index + 1}/{rounds}")
                runs.append(_measure(os.path.join(directory, f"round-{index}"), count))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    # Each step's least disturbed round (the machine is shared; a step's CPU time only
    # grows with interference), then the sum of those.
    figures = {"crews": float(count), **{step: min(run[step] for run in runs) for step in _STEPS}}
    figures["steps_us"] = sum(figures[step] for step in _STEPS)
    figures["steps_ceiling_per_s"] = 1e6 / figures["steps_us"]
    units = {"crews": "crews", **dict.fromkeys(_STEPS, "µs/crew"), "steps_us": "µs/crew"}
    units["steps_ceiling_per_s"] = "crews/s"
    notes = (
        f"{count:,} crews of the lifecycle bench's finite template, each step timed alone from a "
        f"collected heap, process CPU time, least of {rounds} round(s) per step; "
        "steps_ceiling_per_s = 1e6 / steps_us bounds expiries_per_s"
    )
    return BenchResult("wakecost", figures, units, notes=notes)


def _measure(directory: str, count: int) -> dict[str, float]:
    os.makedirs(directory)
    template = capture_template(os.path.join(directory, "template.db"), FINITE_NAME)
    db = os.path.join(directory, "wakecost.db")
    crews = bench_crew_ids(count)
    populate(db, template, crews, expires_at=datetime.now(UTC) + timedelta(days=1))  # none expires meanwhile
    rt = Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories=FACTORIES)
    hub = rt.hub
    assert isinstance(hub, SqliteEventHub)  # the bench reads the adapter's snapshot rows directly
    figures: dict[str, float] = {}
    try:
        records: list[SnapshotRecord | None] = []
        figures["snapshot_read_us"] = _per_crew_us(count, lambda: records.extend(hub.load_snapshot(c) for c in crews))
        texts = [record.snapshot.decode() for record in records if record is not None]
        if len(texts) != count:
            raise RuntimeError(f"{count - len(texts)} crew snapshot(s) missing from the bench store")
        dicts: list[dict[str, object]] = []
        figures["snapshot_json_us"] = _per_crew_us(count, lambda: dicts.extend(json.loads(t) for t in texts))
        snapshots: list[CrewSnapshot] = []
        figures["snapshot_structure_us"] = _per_crew_us(count, lambda: snapshots.extend(from_dict(d) for d in dicts))
        built: list[BuiltCrew] = []
        figures["crew_build_us"] = _per_crew_us(
            count, lambda: built.extend(sup.activator.build(s.name, s.id) for s in snapshots)
        )
        addresses = [[MailboxAddress.crew(c), MailboxAddress.parse(f"agent://{c}/a")] for c in crews]
        registrations: list[list[MailboxRegistration]] = []
        figures["mailbox_reopen_us"] = _per_crew_us(
            count, lambda: registrations.extend(hub.register_mailboxes(pair) for pair in addresses)
        )
        groups = [
            [r for pair in registrations[i : i + _CLOSE_GROUP] for r in pair] for i in range(0, count, _CLOSE_GROUP)
        ]
        figures["mailbox_close_us"] = _per_crew_us(count, lambda: [hub.close_mailboxes(group) for group in groups])
        figures["crew_stop_us"] = _per_crew_us(count, lambda: [crew.ref.stop() for crew in built])
    finally:
        sup.stop()
        rt.stop()
    return figures
