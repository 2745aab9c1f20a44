"""Finishing a crew: ``Completed`` and ``Failed``, ended crews and the outcomes kept
(Orkeon EventHub & Crew Lifecycle specification, §7), transitions of
:class:`~orkeon_actors.lifecycle.supervisor_actor.SupervisorActor`.

Plain functions of the supervisor actor's state, called only in its turns: the crew's
``Finished`` report (:func:`crew_finished`), ``CrewSupervisor.end`` and the fleet's
stop order (:func:`end_crew`), and the crew's ``Closed`` report once its actor stopped
(:func:`crew_gone`).

Guarantees: a crew's final state reflects every message it consumed, so they are
acknowledged in the transaction that deletes its snapshot; a crash before that commit
wakes it from the snapshot again, the messages are redelivered, and it finishes again.
A crew that finishes while it falls asleep does not sleep (its sleepers get ``False``).
A finished crew's mailboxes close and its actor stops at once (not at the supervisor's
stop), its outcome recorded durably and the last ``finished_memory`` ones kept in
memory. :func:`end_crew` makes a crew fail whatever its state (waking it first if it is
asleep); it raises ``HubStoppedError`` while the supervisor stops and
``InvalidArgumentError`` if an asleep crew cannot be woken to be ended.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pykka
from loguru import logger

from orkeon_actors.crew.protocol import CloseMailboxes, End
from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import HubStoppedError, InvalidArgumentError
from orkeon_actors.hub.memory import note_crew_finished
from orkeon_actors.lifecycle.expiry_wakes import no_longer_activating
from orkeon_actors.lifecycle.metrics import LOG_COMPONENT, WakeTrigger, log_transition
from orkeon_actors.lifecycle.ports import LifecycleState, StoredState
from orkeon_actors.lifecycle.supervisor_state import CrewEntry, topic_patterns
from orkeon_actors.lifecycle.wake_transitions import wake_crew
from orkeon_actors.model.ids import CrewId

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor_actor import SupervisorActor

__all__ = ["crew_finished", "crew_gone", "end_crew"]


def crew_finished(actor: SupervisorActor, crew_id: CrewId, status: CrewStatus) -> None:
    """The crew reported it finished with ``status`` (``Completed`` or ``Failed``):
    settle what it was doing (a wake's handover, a sleep or checkpoint under way, the
    sleeps asked for meanwhile, all answered ``False``), refuse later posts, delete its
    snapshot acknowledging what it consumed, and close its mailboxes (its ``Closed``
    report then makes it :func:`crew_gone`)."""
    entry = actor.entries.get(crew_id)
    if entry is None or entry.finished:
        return
    entry.finished = True
    actor.shared.leave_live(crew_id)  # its snapshot (and what was kept for it) is deleted
    actor.shared.end_checkpoint(crew_id, None)
    no_longer_activating(actor, crew_id)
    before = entry.state
    if entry.handover is not None and entry.state is LifecycleState.ACTIVATING:
        actor.shared.remove_patterns(entry.handover.patterns, transient=True)
        entry.handover = None
    entry.refuse_deferred_sleeps()
    if before is LifecycleState.SNAPSHOTTING:  # ended while it fell asleep: it does not sleep
        _sleep_abandoned(actor, entry)
    entry.state = LifecycleState.COMPLETED if status is CrewStatus.COMPLETED else LifecycleState.FAILED
    note_crew_finished(actor.hub, crew_id, status.value)  # a late post is refused saying the crew finished
    actor.idle.forget(crew_id)
    log_transition(crew_id, before, entry.state)
    # Its final state reflects every message it consumed: acknowledge them with the
    # deletion of its snapshot (a crash before that commit wakes it from the
    # snapshot again, those messages redelivered, and it finishes again).
    ledger = entry.ledger
    consumed = ledger.view()
    actor.hub.end_deferral(crew_id)  # its waits are withdrawn: it consumes nothing more
    actor.store.delete_async(crew_id, consumed, on_deleted=lambda: ledger.acknowledged(consumed))
    # Close its mailboxes and stop its actor now, not at stop(): thousands of
    # finished crews would otherwise each hold their state in memory (and every
    # full garbage collection would walk it). Written after the deletion above (the
    # writer commits in order), so the messages it consumed stay kept until that
    # commit acknowledges them; its outcome stays in ``outcomes``.
    try:
        entry.ref.tell(CloseMailboxes(actor.inbox, keep_final=actor.sup.finished_memory > 0))
    except pykka.ActorDeadError:
        logger.debug("crew {}: stopped before its mailboxes were closed (its stop closed them)", crew_id)
        crew_gone(actor, crew_id, CrewOutcome(status))


def _sleep_abandoned(actor: SupervisorActor, entry: CrewEntry) -> None:
    """A crew that finishes (ended) while snapshotting: unindex its sleep snapshot's
    patterns (indexed when its snapshot was taken), answer its sleepers ``False``."""
    snapshot, entry.snapshot, entry.taken = entry.snapshot, None, None
    if snapshot is not None and not entry.checkpoint:
        actor.shared.remove_patterns(topic_patterns(snapshot))
        actor.shared.remove_patterns(topic_patterns(snapshot), transient=True)
    for future in entry.sleepers:
        future.set_result(False)
    entry.sleepers.clear()
    entry.buffered.clear()  # posts to a crew that ends: its mailboxes close


def end_crew(actor: SupervisorActor, crew_id: CrewId, order: End) -> bool:
    """Make the crew fail with ``order``'s cause whatever its state; ``False`` if
    there is nothing to end (finished, or unknown here). Active or waking: told now
    (handled between two turns). Snapshotting: told now, behind the Passivate, and
    its snapshot is not saved (or, saved already, deleted with its failure); if its
    Release was told already (its actor is stopping), it is woken once its sleep
    committed and told then. Asleep: woken, then told (before anything posted to it
    after this call)."""
    entry = actor.entries.get(crew_id)
    if entry is None:
        if actor.shutting_down:
            raise HubStoppedError(f"crew {crew_id} cannot be ended: its supervisor is stopping")
        if actor.store.stored_state(crew_id) is not StoredState.ASLEEP:
            return False
        wake_crew(actor, crew_id, None, time.perf_counter(), cause=WakeTrigger.EXPLICIT)
        entry = actor.entries.get(crew_id)
        if entry is None:
            raise InvalidArgumentError(f"crew {crew_id} is asleep but could not be woken to end it: see the log")
    if entry.finished or entry.ending is not None:
        return not entry.finished
    entry.ending = order
    logger.bind(component=LOG_COMPONENT, crew_id=str(crew_id), event="end", state=entry.state.value).debug(
        "crew {}: ending it ({}){}", crew_id, order.error_type, " once it slept" if entry.releasing else ""
    )
    if not entry.releasing:
        entry.ref.tell(order)
    return True


def crew_gone(actor: SupervisorActor, crew_id: CrewId, outcome: CrewOutcome) -> None:
    """Forget a finished crew whose actor stopped; remember its outcome (the last
    ``finished_memory`` ones)."""
    actor.sup.outcome_book.record(crew_id, outcome)
    actor.outcomes[crew_id] = outcome
    actor.outcomes.move_to_end(crew_id)
    while len(actor.outcomes) > actor.sup.finished_memory:
        actor.outcomes.popitem(last=False)
    entry = actor.entries.get(crew_id)
    if entry is None or not entry.finished or entry.stopping:
        return
    del actor.entries[crew_id]
    actor.shared.forget_crew(crew_id)
    actor.idle.forget(crew_id)  # after ``live``: a late activity report is ignored from now on
