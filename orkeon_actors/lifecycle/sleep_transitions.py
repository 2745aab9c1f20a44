"""Putting a crew to sleep: ``Active`` → ``Snapshotting`` → ``Asleep``, or back to
``Active`` (Orkeon EventHub & Crew Lifecycle specification, §7, §11), transitions of
:class:`~orkeon_actors.lifecycle.supervisor_actor.SupervisorActor`.

Plain functions of the supervisor actor's state, called only in its turns, one per step
of the sleep's conversation with the crew and the store writer: the request
(:func:`request_sleep`, and its triggers: :func:`sleep_if_idle`, :func:`enforce_cap`),
the crew's ``SnapshotTaken`` (:func:`snapshot_taken`) and ``Passivated``
(:func:`snapshotted`: the save is queued), the writer's ``Saved`` (:func:`saved`) or
``SaveFailed`` and the crew's ``SleepRefused`` (:func:`back_to_active`), and the crew's
``Released`` (:func:`released`: asleep). A checkpoint
(:mod:`~orkeon_actors.lifecycle.checkpoint`) is this same snapshot transaction without
the sleep, so these steps branch on ``CrewEntry.checkpoint``.

Guarantees: the snapshot, its ``pending_waits`` rows and the acknowledgement of every
mailbox message the crew consumed since its previous snapshot are written in one
transaction; if it fails or the crew refuses (it was not waiting for a message), the
crew re-arms its waits and stays ``Active``, and its sleepers get ``False``. Only after
the commit are its mailboxes parked and its actor stopped, so a sleeping crew owns no
actor and no thread. A trigger that arrives while it snapshots is handed to a wake as
soon as it is asleep. The one closure that runs elsewhere (``on_saved``, the writer's
thread after the commit) touches only the crew's acknowledgement ledger and the
lock-protected :class:`~orkeon_actors.lifecycle.supervisor_state.SharedState`, then
tells the supervisor ``Saved``.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from loguru import logger

from orkeon_actors.crew.handover import Handover, matching_filters, snapshot_cursors
from orkeon_actors.crew.protocol import (
    Deliver,
    Passivate,
    Release,
    Released,
    ReleasePurpose,
    SnapshotTaken,
)
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.lifecycle.checkpoint import checkpointed, sleep_after_checkpoint
from orkeon_actors.lifecycle.expiry_wakes import no_longer_activating
from orkeon_actors.lifecycle.finish_transitions import end_crew
from orkeon_actors.lifecycle.metrics import WakeTrigger, log_transition
from orkeon_actors.lifecycle.ports import LifecycleState, SleepReason
from orkeon_actors.lifecycle.supervisor_state import (
    Saved,
    SaveFailed,
    durable_patterns,
    tell_supervisor,
    topic_patterns,
)
from orkeon_actors.lifecycle.wake_transitions import wake_crew
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor_actor import SupervisorActor

__all__ = [
    "back_to_active",
    "enforce_cap",
    "released",
    "request_sleep",
    "saved",
    "sleep_if_idle",
    "snapshot_taken",
    "snapshotted",
]


def request_sleep(actor: SupervisorActor, crew_id: CrewId, reason: SleepReason, future: Future[bool] | None) -> None:
    """Ask an Active crew to sleep (``CrewSupervisor.sleep``, idle, the cap, stop):
    tell it to passivate. Waking or checkpointing: asked again once it is Active.
    Otherwise nothing happens and ``future`` is set at once (``True`` only if it is
    asleep in the store already)."""
    entry = actor.entries.get(crew_id)
    if entry is not None and not entry.finished and (entry.state is LifecycleState.ACTIVATING or entry.checkpoint):
        entry.deferred_sleeps.append((reason, future))  # asked again once its handover or checkpoint is done
        return
    if entry is None or entry.state is not LifecycleState.ACTIVE or entry.finished or entry.stopping:
        if future is not None:
            future.set_result(entry is None and _asleep_in_store(actor, crew_id))
        return
    entry.state = LifecycleState.SNAPSHOTTING
    entry.reason = reason
    actor.idle.pause(crew_id)
    if future is not None:
        entry.sleepers.append(future)
    log_transition(crew_id, LifecycleState.ACTIVE, LifecycleState.SNAPSHOTTING, reason=reason.value)
    entry.snapshot = entry.taken = None
    entry.ref.tell(Passivate(actor.inbox, entry.ledger))


def snapshot_taken(actor: SupervisorActor, report: SnapshotTaken) -> None:
    """The crew took its sleep snapshot (its cursors stay open until its release):
    index it under its patterns, and from now on keep the topic messages for its
    cursors (see :func:`~orkeon_actors.lifecycle.wake_transitions.keep_for_handovers`)."""
    entry = actor.entries.get(report.crew_id)
    if entry is None or entry.state is not LifecycleState.SNAPSHOTTING:
        return
    snapshot = report.snapshot
    entry.snapshot = snapshot
    entry.taken = report
    if entry.checkpoint:
        return  # it does not sleep: its cursors stay open and hold what they receive
    actor.shared.add_patterns(topic_patterns(snapshot))
    actor.shared.add_patterns(topic_patterns(snapshot), transient=True)


def _asleep_in_store(actor: SupervisorActor, crew_id: CrewId) -> bool:
    return actor.wakes.has_pending_waits(crew_id)


def snapshotted(actor: SupervisorActor, crew_id: CrewId) -> None:
    """The crew withdrew its live waits and none had fired: every message in the
    consumed view of its snapshot was handled, so the snapshot reflects it (a message
    consumed but still in flight to the crew refuses the sleep, and nothing is saved:
    its row must stay until a snapshot reflects it). Save it."""
    entry = actor.entries.get(crew_id)
    if entry is None or entry.state is not LifecycleState.SNAPSHOTTING or entry.stopping:
        return  # stopping: stop() gave up on it, it parks as it is
    if entry.ending is not None:
        return  # its End follows in its inbox: it fails, and its Finished settles the sleep
    taken = entry.taken
    if taken is None:
        return
    snapshot, consumed = taken.snapshot, taken.consumed
    me = actor.actor_ref
    ledger = entry.ledger
    shared = actor.shared
    live = durable_patterns(snapshot, entry.volatile) if entry.checkpoint else None
    reflected = frozenset(taken.reflected_events)

    def on_saved() -> None:  # the writer thread, after the commit
        ledger.acknowledged(consumed)
        if live is not None:  # a checkpoint: its cursors are durable from now on
            shared.go_live(crew_id, live)
            with shared.lock:
                if crew_id in shared.live:
                    shared.kept_read.add(crew_id)
        # Its waiting publishers keep what the snapshot does not reflect (rows exist now);
        # a stalled publisher will not keep for it what the snapshot reflects.
        shared.saved_reflecting(crew_id, reflected)
        shared.end_checkpoint(crew_id, reflected)
        tell_supervisor(me, Saved(crew_id))

    actor.store.save_async(
        crew_id,
        snapshot,
        list(entry.triggers),
        on_saved=on_saved,
        on_error=lambda exc: tell_supervisor(me, SaveFailed(crew_id, exc)),
        consumed=consumed,
        kept_upto=entry.kept_upto,
        reflected=taken.reflected_events,
        checkpoint=entry.checkpoint,
    )


def back_to_active(actor: SupervisorActor, crew_id: CrewId, why: str, *, failed: bool) -> None:
    """The sleep (or checkpoint) did not happen: refused by the crew (it was not
    waiting for a message) or its save ``failed``. Unindex its snapshot, re-arm its
    waits and deliver what arrived meanwhile, answer its sleepers ``False``, restart its
    idle count; a checkpoint is asked for again (see ``SharedState.end_checkpoint``)."""
    entry = actor.entries.get(crew_id)
    if entry is None or entry.state is not LifecycleState.SNAPSHOTTING:
        return
    if failed:
        actor.stats.sleep_failed()
    else:
        actor.stats.sleep_refused()
    log_transition(crew_id, LifecycleState.SNAPSHOTTING, LifecycleState.ACTIVE, warning=failed, reason=why)
    snapshot, entry.snapshot, entry.taken = entry.snapshot, None, None
    if entry.checkpoint:
        entry.checkpoint = False
        snapshot = None  # indexed under nothing: see _snapshot_taken
        if failed:
            logger.error("crew {}: its checkpoint failed ({}); tried again up to 3 saves", crew_id, why)
        actor.shared.end_checkpoint(crew_id, None, retry=True, failed=failed)
    if snapshot is not None:
        actor.shared.remove_patterns(topic_patterns(snapshot))
        # Its cursors never closed: they hold every topic message kept meanwhile.
        actor.shared.remove_patterns(topic_patterns(snapshot), transient=True)
    entry.state = LifecycleState.ACTIVE
    entry.handover = None
    entry.carry.clear()
    entry.resume()
    for future in entry.sleepers:
        future.set_result(False)
    entry.sleepers.clear()
    actor.idle.restart(crew_id)
    sleep_after_checkpoint(actor, crew_id, entry)


def saved(actor: SupervisorActor, crew_id: CrewId) -> None:
    """Its snapshot committed: a checkpoint stays Active; a sleep tells the crew to
    release its mailboxes (parked) and stop, its ``Released`` follows."""
    entry = actor.entries.get(crew_id)
    if entry is None or entry.stopping or entry.finished or entry.ending is not None:
        return  # finished or ending (its End is told): its Finished deletes that snapshot
    if entry.checkpoint:
        checkpointed(actor, crew_id, entry)
        return
    entry.releasing = True
    entry.ref.tell(Release(actor.inbox, ReleasePurpose.SLEEP))


def released(actor: SupervisorActor, report: Released) -> None:
    """The crew parked its mailboxes and its actor stopped: it is asleep. Schedule its
    finite waits, answer its sleepers ``True``, and hand what its snapshot does not hold
    over to a wake at once (a post or topic message that arrived while it snapshotted),
    or, while the supervisor stops, keep those topic messages in the store. An
    ``end`` asked meanwhile is made now (the crew is woken for it)."""
    crew_id = report.crew_id
    if report.purpose is ReleasePurpose.SHUTDOWN:
        actor.parked_at_stop(crew_id)
        return
    entry = actor.entries.pop(crew_id, None)
    if entry is None:
        return
    entry.carry.extend(report.leftovers)
    no_longer_activating(actor, crew_id)
    actor.idle.forget(crew_id)
    snapshot, entry.snapshot, entry.taken = entry.snapshot, None, None
    actor.shared.forget_crew(crew_id)
    # Asleep: the sleeping crews' keeping takes over, once ``kept_read`` no longer
    # has it (a message routed after it left the live crews must not skip both).
    actor.shared.leave_live(crew_id)
    actor.shared.end_checkpoint(crew_id, None)  # settled by its save already
    actor.hub.end_deferral(crew_id)
    if len(entry.ledger):
        logger.warning("crew {}: asleep with {} consumed message(s) unacknowledged", crew_id, len(entry.ledger))
    actor.stats.slept(entry.reason)
    log_transition(crew_id, LifecycleState.SNAPSHOTTING, LifecycleState.ASLEEP, reason=entry.reason.value)
    if snapshot is not None:
        for wait in snapshot.pending_waits:
            if wait.expires_at is not None:
                actor.waits.schedule(crew_id, wait.wait_id, wait.expires_at)
    for future in entry.sleepers:
        future.set_result(True)
    kept: list[Message] = []
    if snapshot is not None:
        actor.shared.remove_patterns(topic_patterns(snapshot), transient=True)
        # Topic messages its cursors got after the snapshot, or that were kept for it
        # while it snapshotted: the snapshot does not hold them, hand them over.
        handover = Handover(crew_id, snapshot_cursors(snapshot))
        for message in [*entry.carry, *(entry.handover.messages if entry.handover is not None else [])]:
            handover.keep(message)
        kept = handover.without({m.id for a in snapshot.agents for c in a.cursors for m in c.buffered})
    if (entry.buffered or kept) and not actor.shutting_down:  # arrived while it snapshotted: wake at once
        first = entry.buffered[0] if entry.buffered else None
        wake_crew(actor, crew_id, first, time.perf_counter(), cause=WakeTrigger.BUFFERED, carry=kept)
        woken = actor.entries.get(crew_id)
        if woken is not None:
            for message in entry.buffered[1:]:
                woken.ref.tell(Deliver(message))
    elif kept and snapshot is not None:  # stopping: keep them for its cursors in the store
        filters = snapshot_cursors(snapshot)
        for message in kept:
            keys = [actor.wakes.cursor_key(f) for f in matching_filters(filters, crew_id, message)]
            actor.wakes.keep_event(crew_id, keys, message)
    if entry.ending is not None and not actor.shutting_down:  # asked while it fell asleep
        end_crew(actor, crew_id, entry.ending)


def sleep_if_idle(actor: SupervisorActor, crew_id: CrewId) -> None:
    """The idle detector's callback: sleep the crew if it waits for a message."""
    entry = actor.entries.get(crew_id)
    if entry is None or entry.finished or (entry.state is not LifecycleState.ACTIVE and not entry.checkpoint):
        return
    if actor.shared.status.get(crew_id) is CrewStatus.WAITING:
        request_sleep(actor, crew_id, SleepReason.IDLE, None)  # deferred until its checkpoint is done
    else:
        actor.idle.restart(crew_id)


def enforce_cap(actor: SupervisorActor) -> None:
    """More crews Active than ``max_active``: sleep the least recently touched of those
    waiting for a message (one working is never put to sleep for the cap)."""
    cap = actor.sup.max_active
    if cap is None:
        return
    active = [(c, e) for c, e in actor.entries.items() if e.state is LifecycleState.ACTIVE and not e.finished]
    excess = len(active) - cap
    if excess <= 0:
        return
    waiting = [c for c, _ in active if actor.shared.status.get(c) is CrewStatus.WAITING]
    for crew_id in actor.idle.least_recently_touched(waiting, excess):
        request_sleep(actor, crew_id, SleepReason.CAPACITY, None)
