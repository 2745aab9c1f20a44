"""Waking a crew: ``Asleep`` → ``Activating`` → ``Active`` (Orkeon EventHub & Crew
Lifecycle specification, §7), transitions of :class:`~orkeon_actors.lifecycle.supervisor_actor.SupervisorActor`.

Plain functions of the supervisor actor's state (``actor``), called only in its turns:
what decides that a dispatched message wakes a sleeping crew (:func:`wake_on_dispatch`:
a post or send to one of its mailboxes, a reply it waits for, a topic message one of
its parked waits matches), the wake itself (:func:`wake_crew`) and the **handover**: from
the wake until the restored crew's cursors are open again, every topic message matching
them is kept (:func:`keep_for_handovers`) and then handed over in the order the
supervisor heard of it, merged with those the store kept while the crew slept
(:func:`kept_loaded`, :func:`cursors_open`).

Guarantees: nothing is written at wake, so a wake that fails (no snapshot, the trigger
already processed, a factory that raises) leaves the crew asleep on its last snapshot,
and its next trigger wakes it again. A trigger that reaches a crew still snapshotting is
not lost: a post or reply is buffered for the crew's release, a topic message kept for
its handover. While the supervisor stops nothing is woken (posts stay kept, expiries
indexed: the next boot wakes the crew). The only closures that run elsewhere are the
store writer's callbacks of the kept-events read, which touch the lock-protected
:class:`~orkeon_actors.lifecycle.supervisor_state.SharedState` or tell the supervisor.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from loguru import logger

from orkeon_actors.crew.crew_actor import hand_over
from orkeon_actors.crew.handover import Handover, snapshot_cursors
from orkeon_actors.hub.port import POST_TOPIC, REPLY_TOPIC, SEND_TOPIC
from orkeon_actors.hub.routing import cursor_matches, topic_matches
from orkeon_actors.lifecycle.activation import BuiltCrew
from orkeon_actors.lifecycle.metrics import WakeTrigger, log_transition
from orkeon_actors.lifecycle.ports import KeptEvents, LifecycleState
from orkeon_actors.lifecycle.supervisor_state import (
    CrewEntry,
    KeptLoaded,
    durable_patterns,
    tell_supervisor,
    topic_patterns,
)
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor_actor import SupervisorActor

__all__ = ["cursors_open", "keep_for_handovers", "kept_loaded", "wake_crew", "wake_on_dispatch"]


def wake_crew(
    actor: SupervisorActor,
    crew_id: CrewId,
    trigger: Message | None,
    started: float,
    *,
    expiry: bool = False,
    cause: str | None = None,
    carry: Sequence[Message] = (),
    texts: Mapping[CrewId, str] | None = None,
) -> bool:
    """Activate a sleeping crew. A crew without topic cursors is restored and Active
    at once. Otherwise, from here until its restored cursors are open, the
    topic messages matching them are kept (``carry`` first: kept while it slept;
    then the trigger, messages in mid-routing now, and every one heard of until
    then) and handed over in that order (:func:`hand_over`). ``texts``: snapshot
    texts read for a batch in this turn (``SnapshotActivator.read_many``)."""
    entry = actor.entries.get(crew_id)
    if entry is not None:
        if entry.state is LifecycleState.SNAPSHOTTING and trigger is not None:
            if trigger.topic in (POST_TOPIC, SEND_TOPIC, REPLY_TOPIC):
                entry.buffered.append(trigger)
            else:
                keep_for_handovers(actor, trigger)
        return False
    if actor.shutting_down:  # posts stay kept and expiries indexed: the next boot wakes it
        logger.debug("crew {}: not woken, the supervisor is stopping", crew_id)
        return False
    snapshot = actor.activator.load(crew_id, trigger, texts)
    if snapshot is None:
        return False
    if cause is None:
        cause = WakeTrigger.EXPIRY if expiry else _cause_of(trigger)
    log_transition(crew_id, LifecycleState.ASLEEP, LifecycleState.ACTIVATING, trigger=cause)
    entry = actor.register_crew(snapshot.name, crew_id)
    entry.state = LifecycleState.ACTIVATING
    entry.wake_cause = cause
    filters = snapshot_cursors(snapshot)
    if not filters and (trigger is None or trigger.topic in (POST_TOPIC, SEND_TOPIC, REPLY_TOPIC)):
        # No topic cursor to catch up (so nothing kept for it either): no handover,
        # restored and Active at once.
        actor.shared.remove_patterns(topic_patterns(snapshot))
        with actor.shared.lock:
            actor.shared.activating.add(crew_id)
            actor.shared.handed.add(crew_id)  # its first activity report ends its restore
        entry.triggers = actor.activator.restore(
            BuiltCrew(crew_id, entry.name, entry.ref, entry.idle_timeout, entry.ledger, entry.volatile),
            snapshot,
            trigger,
        )
        actor.stats.woke(cause, time.perf_counter() - started)
        actor.activated(crew_id, entry)
        actor.store.mark_active_async(crew_id)  # the views show it running
        log_transition(crew_id, LifecycleState.ACTIVATING, LifecycleState.ACTIVE, trigger=cause)
        return True
    handover = entry.handover = Handover(crew_id, filters)
    actor.shared.add_patterns(handover.patterns, transient=True)
    # From now on its snapshot's cursors are kept durably while it is live.
    actor.shared.go_live(crew_id, durable_patterns(snapshot, entry.volatile))
    actor.shared.remove_patterns(topic_patterns(snapshot))
    with actor.shared.lock:
        actor.shared.activating.add(crew_id)
    for message in carry:
        handover.keep(message)
    delivered = False
    if trigger is not None and trigger.topic not in (POST_TOPIC, SEND_TOPIC, REPLY_TOPIC):
        delivered = handover.keep(trigger) or handover.holds(trigger)
    for message in list(actor.shared.in_flight.values()):  # routed now, maybe before its cursors reopen
        handover.keep(message)
    me = actor.actor_ref
    entry.triggers = actor.activator.restore(
        BuiltCrew(crew_id, entry.name, entry.ref, entry.idle_timeout, entry.ledger, entry.volatile),
        snapshot,
        trigger,
        supervision=actor.inbox,
        handed_over=delivered,
    )
    shared = actor.shared
    shared.kept_read.discard(crew_id)

    def read() -> None:  # the writer, right after the read: in order with the keeping writes
        with shared.lock:
            if crew_id in shared.live:  # later keeping writes skip it: its handover has them
                shared.kept_read.add(crew_id)

    def not_loaded(exc: BaseException) -> None:
        logger.warning("crew {}: its kept topic events could not be read ({}); handed over later", crew_id, exc)
        tell_supervisor(me, KeptLoaded(crew_id, KeptEvents((), {}, 0)))

    actor.wakes.load_kept(crew_id, read, lambda kept: tell_supervisor(me, KeptLoaded(crew_id, kept)), not_loaded)
    actor.stats.woke(cause, time.perf_counter() - started)
    return True


def keep_for_handovers(actor: SupervisorActor, message: Message) -> None:
    """Keep a topic message for every crew whose cursors are closed (snapshotting or
    activating) and match it."""
    if not actor.shared.handover_view:
        return  # no crew is snapshotting or activating
    for crew_id, entry in actor.entries.items():
        if entry.state is LifecycleState.ACTIVATING and entry.handover is not None:
            entry.handover.keep(message)
        elif entry.state is LifecycleState.SNAPSHOTTING and not entry.checkpoint:
            if entry.handover is None:
                if entry.snapshot is None:
                    continue  # not snapshotted yet: its cursors are open
                entry.handover = Handover(crew_id, snapshot_cursors(entry.snapshot))
            entry.handover.keep(message)


def kept_loaded(actor: SupervisorActor, loaded: KeptLoaded) -> None:
    """The events kept in the store for the crew (while it slept, and those a publish
    kept before the wake read them): merged into the handover (:meth:`Handover.merge`)."""
    entry = actor.entries.get(loaded.crew_id)
    if entry is None or entry.state is not LifecycleState.ACTIVATING or entry.handover is None:
        return
    entry.kept_loaded = True
    entry.kept_upto = loaded.kept.upto
    entry.kept_missed = dict(loaded.kept.missed)
    entry.handover.merge(loaded.kept.messages)
    if entry.cursors_open:
        _hand_over(actor, loaded.crew_id, entry)


def cursors_open(actor: SupervisorActor, crew_id: CrewId) -> None:
    entry = actor.entries.get(crew_id)
    if entry is None or entry.state is not LifecycleState.ACTIVATING or entry.handover is None:
        return
    entry.cursors_open = True
    if entry.kept_loaded:
        _hand_over(actor, crew_id, entry)


def _hand_over(actor: SupervisorActor, crew_id: CrewId, entry: CrewEntry) -> None:
    """The woken crew's cursors are open again and its kept events read: hand over
    everything kept, go Active."""
    handover, entry.handover = entry.handover, None
    assert handover is not None
    actor.shared.remove_patterns(handover.patterns, transient=True)
    with actor.shared.lock:
        if crew_id in actor.shared.activating:
            actor.shared.handed.add(crew_id)  # its next activity report ends its restore
    hand_over(entry.ref, handover.messages, entry.kept_missed)
    actor.activated(crew_id, entry)
    actor.store.mark_active_async(crew_id)  # the views show it running
    deferred, entry.deferred_sleeps = entry.deferred_sleeps, []
    for reason, future in deferred:
        actor.sleep(crew_id, reason, future)
    log_transition(
        crew_id,
        LifecycleState.ACTIVATING,
        LifecycleState.ACTIVE,
        trigger=entry.wake_cause,
        handed_over=str(len(handover.messages)),
    )


def wake_on_dispatch(actor: SupervisorActor, message: Message) -> None:
    """``message`` was dispatched (or kept for a mailbox nobody holds): wake the sleeping
    crew a post, send or reply is for, or every sleeping crew one of whose parked topic
    waits it matches (not those whose committed snapshot already reflects it); keep it
    for the handovers under way."""
    started = time.perf_counter()
    if message.topic in (POST_TOPIC, SEND_TOPIC):
        address = message.target_mailbox
        crew = address.crew_id if address is not None else None
        if crew is not None and crew not in actor.entries:
            wake_crew(actor, CrewId(crew), message, started)
        return
    if message.topic == REPLY_TOPIC:
        crew = message.target_crew_id
        if crew is not None and crew not in actor.entries and _waits_on_reply(actor, crew, message):
            wake_crew(actor, crew, message, started)
        return
    patterns = [p for p in actor.shared.pattern_view if topic_matches(p, message.topic)]
    if not patterns:
        return
    keep_for_handovers(actor, message)
    woken: set[CrewId] = set()
    reflecting = actor.shared.reflected_in_flight.get(message.id, ())  # no trigger for those any more
    for crew, topic, metadata in actor.wakes.topic_waits(patterns):
        if crew in woken or crew in actor.entries or crew in reflecting:
            continue
        if not cursor_matches(topic, metadata, crew, message):
            continue
        if wake_crew(actor, crew, message, started):
            woken.add(crew)


def _waits_on_reply(actor: SupervisorActor, crew: CrewId, message: Message) -> bool:
    return actor.wakes.waits_on_reply(crew, message.correlation_id)


def _cause_of(trigger: Message | None) -> str:
    if trigger is None:
        return WakeTrigger.EXPLICIT
    if trigger.topic in (POST_TOPIC, SEND_TOPIC):
        return WakeTrigger.POST
    if trigger.topic == REPLY_TOPIC:
        return WakeTrigger.REPLY
    return WakeTrigger.TOPIC
