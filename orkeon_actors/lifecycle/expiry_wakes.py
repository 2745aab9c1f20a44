"""Waking crews whose finite wait expired (Orkeon EventHub & Crew Lifecycle
specification, §7, §9.2), transitions of
:class:`~orkeon_actors.lifecycle.supervisor_actor.SupervisorActor`.

The durable wait scheduler (:mod:`~orkeon_actors.lifecycle.wait_scheduler`) tells the
supervisor a ``Tick`` when a window of expiries is due; :func:`expiry_tick` wakes a
batch of those crews per tick, with backpressure on the woken crews that have not
restored yet (``MAX_ACTIVATING``, ``RESUME_ACTIVATING``, ``DEFERRED_TICK`` in
:mod:`~orkeon_actors.lifecycle.supervisor_state`), and postpones CPython's full
collections while such a burst runs (:mod:`~orkeon_actors.lifecycle.burst_gc`,
:func:`burst_check`). Plain functions of the supervisor actor's state, called only in
its turns; their timers only tell the supervisor.

Guarantees: at most ``MAX_ACTIVATING`` woken crews are restoring at once; a deferred
tick runs again once at most ``RESUME_ACTIVATING`` are, or ``DEFERRED_TICK`` seconds
later (one such timer pending at most), which also forgets the woken crews whose actor
died before restoring: they stay asleep on their snapshot (a wake writes nothing). A
batch whose snapshots cannot be read at once is read crew by crew; a crew that cannot
wake is logged and does not drop the rest of its batch.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from loguru import logger

from orkeon_actors.lifecycle.burst_gc import BURST_QUIET
from orkeon_actors.lifecycle.supervisor_state import (
    DEFERRED_TICK,
    MAX_ACTIVATING,
    RESUME_ACTIVATING,
    BurstCheck,
    Tick,
    tell_supervisor,
    topic_patterns,
)
from orkeon_actors.lifecycle.wake_transitions import wake_crew
from orkeon_actors.model.ids import CrewId

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor_actor import SupervisorActor

__all__ = ["burst_check", "expiry_tick", "no_longer_activating"]


def expiry_tick(actor: SupervisorActor, *, fallback: bool = False) -> None:
    """Wake the crews whose expiry is due, a batch per tick. Backpressure: at most
    ``MAX_ACTIVATING`` woken crews may not have restored yet; once there are that
    many, the tick is deferred until at most ``RESUME_ACTIVATING`` remain (the
    restore reports tell the supervisor) or ``DEFERRED_TICK`` passed. Without it a
    burst of thousands of expiries starts thousands of crews at once, whose threads
    then contend for the interpreter: measured, that costs far more than the
    activations themselves. ``activating`` is kept incrementally; only the
    ``DEFERRED_TICK`` timer (one pending at most) looks for woken crews whose actor
    died before restoring, and forgets them."""
    shared = actor.shared
    if fallback:
        with shared.lock:
            shared.fallback_armed = False
            gone = [c for c in shared.activating if (e := actor.entries.get(c)) is None or not e.ref.is_alive()]
            shared.activating.difference_update(gone)
            shared.handed.difference_update(gone)
        for crew_id in gone:
            _forget_dead(actor, crew_id)
    with shared.lock:
        busy = len(shared.activating)
        room = MAX_ACTIVATING - busy
        if room <= 0 or (shared.tick_deferred and busy > RESUME_ACTIVATING):
            if not shared.fallback_armed:
                me = actor.actor_ref
                actor.hub.scheduler.schedule_at(
                    actor.hub.clock.monotonic() + DEFERRED_TICK, lambda: tell_supervisor(me, Tick(fallback=True))
                )
                shared.fallback_armed = True
            shared.tick_deferred = True  # set last: once it is seen, the timer is armed
            return
        shared.tick_deferred = False
    started = time.perf_counter()
    due = [crew_id for crew_id in actor.waits.due(limit=room) if crew_id not in actor.entries]
    texts: Mapping[CrewId, str] | None = None
    try:
        texts = actor.activator.read_many(due) if due else {}  # the batch's snapshots, one read
    except Exception as exc:  # each crew then reads its own (and fails alone)
        logger.warning("the snapshots of {} due crews could not be read at once ({}); one by one", len(due), exc)
    for crew_id in due:
        actor.stats.expired()
        try:
            wake_crew(actor, crew_id, None, started, expiry=True, texts=texts)
        except Exception:  # one crew that cannot wake must not drop the rest of the batch
            logger.opt(exception=True).error("crew {}: its expiry could not wake it", crew_id)
    now = actor.hub.clock.monotonic()
    if actor.bursts.woke(len(due), now):  # full collections postponed while the burst runs
        _arm_burst_check(actor, now + BURST_QUIET)


def _arm_burst_check(actor: SupervisorActor, at: float) -> None:
    me = actor.actor_ref
    actor.hub.scheduler.schedule_at(at, lambda: tell_supervisor(me, BurstCheck()))


def burst_check(actor: SupervisorActor) -> None:
    """The burst's quiet timer fired: collections back once it is over, else look again."""
    again = actor.bursts.check(actor.hub.clock.monotonic())
    if again is not None:
        _arm_burst_check(actor, again)


def _forget_dead(actor: SupervisorActor, crew_id: CrewId) -> None:
    """A woken crew whose actor stopped before it restored (it never reports back):
    drop it as if the wake had not happened. Activation writes nothing, so it stays
    asleep on its snapshot; its next trigger or the next boot wakes it again."""
    entry = actor.entries.get(crew_id)
    if entry is None or entry.finished or entry.ref.is_alive():
        return
    del actor.entries[crew_id]
    actor.idle.forget(crew_id)
    actor.shared.leave_live(crew_id)
    actor.shared.end_checkpoint(crew_id, None)
    actor.shared.forget_crew(crew_id)
    if entry.handover is not None:
        actor.shared.remove_patterns(entry.handover.patterns, transient=True)
    actor.hub.end_deferral(crew_id)
    snapshot = actor.store.load(crew_id)
    if snapshot is not None:  # indexed again: a matching topic message wakes it
        actor.shared.add_patterns(topic_patterns(snapshot))
    logger.warning("crew {}: its actor stopped before it restored; it stays asleep on its snapshot", crew_id)


def no_longer_activating(actor: SupervisorActor, crew_id: CrewId) -> None:
    """``crew_id`` finished or went away before reporting its restore."""
    if actor.shared.restored(crew_id):
        tell_supervisor(actor.actor_ref, Tick())
