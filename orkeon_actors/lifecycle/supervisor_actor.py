"""``SupervisorActor``: the one actor that owns the lifecycle of every crew of a
supervisor (Orkeon EventHub & Crew Lifecycle specification, §7); see
:mod:`orkeon_actors.lifecycle.supervisor` for the states and guarantees.

Every transition runs in one of its turns: it tells crews the commands of
:mod:`orkeon_actors.crew.protocol` and handles their reports, the store writer's
callbacks and its own timers as messages, never waiting for another actor. Over 600
lines because these turns share one state (:class:`~orkeon_actors.lifecycle.supervisor_state.CrewEntry`
per crew) that no other code may touch; the state, the messages and the handover live
in their own modules.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import pykka
from loguru import logger

from orkeon_actors.crew.crew_actor import CrewActor, start_crew
from orkeon_actors.crew.handover import Handover, matching_filters, snapshot_cursors
from orkeon_actors.crew.protocol import (
    Closed,
    CursorsOpen,
    Deliver,
    End,
    Passivate,
    Passivated,
    Release,
    Released,
    ReleasePurpose,
    Resume,
    SleepRefused,
    SnapshotTaken,
)
from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.lifecycle.burst_gc import BurstCollections
from orkeon_actors.lifecycle.checkpoint import checkpointed, sleep_after_checkpoint, take_checkpoint
from orkeon_actors.lifecycle.expiry_wakes import burst_check, expiry_tick, no_longer_activating
from orkeon_actors.lifecycle.finish_transitions import crew_finished, crew_gone, end_crew
from orkeon_actors.lifecycle.metrics import WakeTrigger, log_transition
from orkeon_actors.lifecycle.ports import LifecycleState, SleepReason, StoredState
from orkeon_actors.lifecycle.supervisor_state import (
    BurstCheck,
    Call,
    CheckpointDue,
    CrewEntry,
    Dispatched,
    Finished,
    IdleCheck,
    KeptLoaded,
    Routing,
    Saved,
    SaveFailed,
    SupervisorInbox,
    Tick,
    durable_patterns,
    tell_supervisor,
    topic_patterns,
)
from orkeon_actors.lifecycle.wait_scheduler import DurableWaitScheduler
from orkeon_actors.lifecycle.wake_transitions import (
    cursors_open,
    keep_for_handovers,
    kept_loaded,
    wake_crew,
    wake_on_dispatch,
)
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor import CrewSupervisor

__all__ = ["SupervisorActor"]


class SupervisorActor(pykka.ThreadingActor):
    use_daemon_thread = True  # never holds an interpreter exit up: see orkeon_actors.actors.exit

    def __init__(self, sup: CrewSupervisor) -> None:
        super().__init__()
        self.sup = sup
        self.hub = sup.hub
        self.store = sup.store
        self.wakes = sup.wakes
        self.shared = sup.shared
        self.stats = sup.stats
        self.activator = sup.activator
        self.idle = sup.idle
        self.idle.on_idle(self._idle)
        self.entries: dict[CrewId, CrewEntry] = {}
        self.outcomes: OrderedDict[CrewId, CrewOutcome] = OrderedDict()
        """The last ``finished_memory`` crews that finished here, oldest first."""
        self.shutting_down = False
        me = self.actor_ref
        self.waits = DurableWaitScheduler(
            sup.expiries,
            self.hub.clock,
            self.hub.scheduler,
            lambda: tell_supervisor(me, Tick()),
            window=sup.window,
            window_size=sup.window_size,
        )
        self.inbox = SupervisorInbox(me)
        self.bursts = BurstCollections(enabled=sup.burst_collections)

    # -- dispatch ---------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        try:
            self._dispatch(message)
        except Exception:  # supervision: one bad transition must not stop the supervisor
            logger.opt(exception=True).error("lifecycle supervisor failed handling {!r}", message)
        return None

    def _dispatch(self, message: Any) -> None:
        if isinstance(message, Call):
            try:
                message.future.set_result(message.fn(self))
            except Exception as exc:
                message.future.set_exception(exc)
        elif isinstance(message, Dispatched):
            try:
                wake_on_dispatch(self, message.message)
            finally:  # not before: a wake until now adopts it in routing order (Handover)
                self.shared.done_routing(message.message.id)
        elif isinstance(message, SnapshotTaken):
            self._snapshot_taken(message)
        elif isinstance(message, Passivated):
            self._snapshotted(message.crew_id)
        elif isinstance(message, SleepRefused):
            self._back_to_active(message.crew_id, f"refused: {message.reason}", failed=False)
        elif isinstance(message, SaveFailed):
            self._back_to_active(message.crew_id, f"snapshot write failed: {message.error}", failed=True)
        elif isinstance(message, Saved):
            self._saved(message.crew_id)
        elif isinstance(message, Released):
            self._released(message)
        elif isinstance(message, IdleCheck):
            self.idle.check(message.crew_id)
        elif isinstance(message, Finished):
            crew_finished(self, message.crew_id, message.status)
        elif isinstance(message, Closed):
            crew_gone(self, message.crew_id, message.outcome)
        elif isinstance(message, Tick):
            expiry_tick(self, fallback=message.fallback)
        elif isinstance(message, Routing):
            keep_for_handovers(self, message.message)
        elif isinstance(message, CursorsOpen):
            cursors_open(self, message.crew_id)
        elif isinstance(message, KeptLoaded):
            kept_loaded(self, message)
        elif isinstance(message, CheckpointDue):
            take_checkpoint(self, message.crew_id)
        elif isinstance(message, BurstCheck):
            burst_check(self)

    # -- boot -------------------------------------------------------------------------

    def boot(self) -> int:
        """Lazy boot: the topic patterns, a window of expiries, crews with kept mail."""
        patterns = self.wakes.topic_patterns()
        with self.shared.lock:
            for topic, count in patterns.items():
                self.shared.patterns[topic] = count
            self.shared.pattern_view = tuple(self.shared.patterns)
        asleep = self.wakes.asleep_count()
        self.stats.booted(asleep)
        self.waits.start()
        # Kept mail, and events kept for a parked wait's cursor (published while the supervisor stopped).
        for crew in self.wakes.crews_to_wake_at_boot():
            if self.store.stored_state(crew) is not None:
                wake_crew(self, crew, None, time.perf_counter(), cause=WakeTrigger.POST)
        return asleep

    # -- spawning ---------------------------------------------------------------------

    def spawn(self, name: str, crew_id: CrewId) -> CrewId:
        if crew_id in self.entries:
            raise InvalidArgumentError(f"crew {crew_id} is already running here")
        stored = self.store.stored_state(crew_id)
        if stored is not None and stored is not StoredState.FAILED:  # a failed crew's audit row may be reused
            raise InvalidArgumentError(f"crew {crew_id} already exists in the store (asleep): wake it instead")
        if self.sup.outcome_book.load(crew_id) is not None:
            self.sup.outcome_book.forget(crew_id)  # the id is used again: the old outcome is history
        entry = self.register_crew(name, crew_id)
        start_crew(entry.ref)
        self.activated(crew_id, entry)
        return crew_id

    def register_crew(self, name: str, crew_id: CrewId) -> CrewEntry:
        crew = self.activator.build(name, crew_id)
        entry = CrewEntry(name, crew.ref, crew.idle_timeout, crew.ledger, crew.volatile)
        self.entries[crew_id] = entry
        self.outcomes.pop(crew_id, None)  # a finished crew's id used again: that outcome is history
        self.idle.touch(crew_id)
        with self.shared.lock:
            self.shared.live.add(crew_id)
            self.shared.status[crew_id] = CrewStatus.CREATED
        return entry

    def activated(self, crew_id: CrewId, entry: CrewEntry) -> None:
        entry.state = LifecycleState.ACTIVE
        self.idle.watch(crew_id, entry.idle_timeout)
        self._enforce_cap()

    # -- sleep ------------------------------------------------------------------------

    def sleep(self, crew_id: CrewId, reason: SleepReason, future: Future[bool] | None) -> None:
        entry = self.entries.get(crew_id)
        if entry is not None and not entry.finished and (entry.state is LifecycleState.ACTIVATING or entry.checkpoint):
            entry.deferred_sleeps.append((reason, future))  # asked again once its handover or checkpoint is done
            return
        if entry is None or entry.state is not LifecycleState.ACTIVE or entry.finished or entry.stopping:
            if future is not None:
                future.set_result(entry is None and self._asleep_in_store(crew_id))
            return
        entry.state = LifecycleState.SNAPSHOTTING
        entry.reason = reason
        self.idle.pause(crew_id)
        if future is not None:
            entry.sleepers.append(future)
        log_transition(crew_id, LifecycleState.ACTIVE, LifecycleState.SNAPSHOTTING, reason=reason.value)
        entry.snapshot = entry.taken = None
        entry.ref.tell(Passivate(self.inbox, entry.ledger))

    def _snapshot_taken(self, report: SnapshotTaken) -> None:
        """The crew took its sleep snapshot (its cursors stay open until its release):
        index it under its patterns, and from now on keep the topic messages for its
        cursors (see :func:`~orkeon_actors.lifecycle.wake_transitions.keep_for_handovers`)."""
        entry = self.entries.get(report.crew_id)
        if entry is None or entry.state is not LifecycleState.SNAPSHOTTING:
            return
        snapshot = report.snapshot
        entry.snapshot = snapshot
        entry.taken = report
        if entry.checkpoint:
            return  # it does not sleep: its cursors stay open and hold what they receive
        self.shared.add_patterns(topic_patterns(snapshot))
        self.shared.add_patterns(topic_patterns(snapshot), transient=True)

    def _asleep_in_store(self, crew_id: CrewId) -> bool:
        return self.wakes.has_pending_waits(crew_id)

    def _snapshotted(self, crew_id: CrewId) -> None:
        """The crew withdrew its live waits and none had fired: every message in the
        consumed view of its snapshot was handled, so the snapshot reflects it (a message
        consumed but still in flight to the crew refuses the sleep, and nothing is saved:
        its row must stay until a snapshot reflects it). Save it."""
        entry = self.entries.get(crew_id)
        if entry is None or entry.state is not LifecycleState.SNAPSHOTTING or entry.stopping:
            return  # stopping: stop() gave up on it, it parks as it is
        if entry.ending is not None:
            return  # its End follows in its inbox: it fails, and its Finished settles the sleep
        taken = entry.taken
        if taken is None:
            return
        snapshot, consumed = taken.snapshot, taken.consumed
        me = self.actor_ref
        ledger = entry.ledger
        shared = self.shared
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

        self.store.save_async(
            crew_id,
            snapshot,
            list(entry.triggers),
            on_saved=on_saved,
            on_error=lambda exc: tell_supervisor(me, SaveFailed(crew_id, exc)),
            consumed=consumed,
            kept_upto=entry.kept_upto,
            reflected=taken.reflected_events,
        )

    def _back_to_active(self, crew_id: CrewId, why: str, *, failed: bool) -> None:
        entry = self.entries.get(crew_id)
        if entry is None or entry.state is not LifecycleState.SNAPSHOTTING:
            return
        if failed:
            self.stats.sleep_failed()
        else:
            self.stats.sleep_refused()
        log_transition(crew_id, LifecycleState.SNAPSHOTTING, LifecycleState.ACTIVE, warning=failed, reason=why)
        snapshot, entry.snapshot, entry.taken = entry.snapshot, None, None
        if entry.checkpoint:
            entry.checkpoint = False
            snapshot = None  # indexed under nothing: see _snapshot_taken
            if failed:
                logger.error("crew {}: its checkpoint failed ({}); tried again up to 3 saves", crew_id, why)
            self.shared.end_checkpoint(crew_id, None, retry=True, failed=failed)
        if snapshot is not None:
            self.shared.remove_patterns(topic_patterns(snapshot))
            # Its cursors never closed: they hold every topic message kept meanwhile.
            self.shared.remove_patterns(topic_patterns(snapshot), transient=True)
        entry.state = LifecycleState.ACTIVE
        entry.handover = None
        entry.carry.clear()
        entry.ref.tell(Resume())
        for message in entry.buffered:
            entry.ref.tell(Deliver(message))
        entry.buffered.clear()
        for future in entry.sleepers:
            future.set_result(False)
        entry.sleepers.clear()
        self.idle.restart(crew_id)
        sleep_after_checkpoint(self, crew_id, entry)

    def _saved(self, crew_id: CrewId) -> None:
        entry = self.entries.get(crew_id)
        if entry is None or entry.stopping or entry.finished or entry.ending is not None:
            return  # finished or ending (its End is told): its Finished deletes that snapshot
        if entry.checkpoint:
            checkpointed(self, crew_id, entry)
            return
        entry.releasing = True
        entry.ref.tell(Release(self.inbox, ReleasePurpose.SLEEP))

    def _released(self, report: Released) -> None:
        crew_id = report.crew_id
        if report.purpose is ReleasePurpose.SHUTDOWN:
            self._parked_at_stop(crew_id)
            return
        entry = self.entries.pop(crew_id, None)
        if entry is None:
            return
        entry.carry.extend(report.leftovers)
        no_longer_activating(self, crew_id)
        self.idle.forget(crew_id)
        snapshot, entry.snapshot, entry.taken = entry.snapshot, None, None
        with self.shared.lock:
            self.shared.live.discard(crew_id)
            self.shared.kept_read.discard(crew_id)
            self.shared.status.pop(crew_id, None)
        # Asleep: the sleeping crews' keeping takes over, once ``kept_read`` no longer
        # has it (a message routed after it left the live crews must not skip both).
        self.shared.leave_live(crew_id)
        self.shared.end_checkpoint(crew_id, None)  # settled by its save already
        self.hub.end_deferral(crew_id)
        if len(entry.ledger):
            logger.warning("crew {}: asleep with {} consumed message(s) unacknowledged", crew_id, len(entry.ledger))
        self.stats.slept(entry.reason)
        log_transition(crew_id, LifecycleState.SNAPSHOTTING, LifecycleState.ASLEEP, reason=entry.reason.value)
        if snapshot is not None:
            for wait in snapshot.pending_waits:
                if wait.expires_at is not None:
                    self.waits.schedule(crew_id, wait.wait_id, wait.expires_at)
        for future in entry.sleepers:
            future.set_result(True)
        kept: list[Message] = []
        if snapshot is not None:
            self.shared.remove_patterns(topic_patterns(snapshot), transient=True)
            # Topic messages its cursors got after the snapshot, or that were kept for it
            # while it snapshotted: the snapshot does not hold them, hand them over.
            handover = Handover(crew_id, snapshot_cursors(snapshot))
            for message in [*entry.carry, *(entry.handover.messages if entry.handover is not None else [])]:
                handover.keep(message)
            kept = handover.without({m.id for a in snapshot.agents for c in a.cursors for m in c.buffered})
        if (entry.buffered or kept) and not self.shutting_down:  # arrived while it snapshotted: wake at once
            first = entry.buffered[0] if entry.buffered else None
            wake_crew(self, crew_id, first, time.perf_counter(), cause=WakeTrigger.BUFFERED, carry=kept)
            woken = self.entries.get(crew_id)
            if woken is not None:
                for message in entry.buffered[1:]:
                    woken.ref.tell(Deliver(message))
        elif kept and snapshot is not None:  # stopping: keep them for its cursors in the store
            filters = snapshot_cursors(snapshot)
            for message in kept:
                keys = [self.wakes.cursor_key(f) for f in matching_filters(filters, crew_id, message)]
                self.wakes.keep_event(crew_id, keys, message)
        if entry.ending is not None and not self.shutting_down:  # asked while it fell asleep
            end_crew(self, crew_id, entry.ending)

    # -- idle detection and the cap ---------------------------------------------------

    def _idle(self, crew_id: CrewId) -> None:
        """The idle detector's callback: sleep the crew if it waits for a message."""
        entry = self.entries.get(crew_id)
        if entry is None or entry.finished or (entry.state is not LifecycleState.ACTIVE and not entry.checkpoint):
            return
        if self.shared.status.get(crew_id) is CrewStatus.WAITING:
            self.sleep(crew_id, SleepReason.IDLE, None)  # deferred until its checkpoint is done
        else:
            self.idle.restart(crew_id)

    def _enforce_cap(self) -> None:
        cap = self.sup.max_active
        if cap is None:
            return
        active = [(c, e) for c, e in self.entries.items() if e.state is LifecycleState.ACTIVE and not e.finished]
        excess = len(active) - cap
        if excess <= 0:
            return
        waiting = [c for c, _ in active if self.shared.status.get(c) is CrewStatus.WAITING]
        for crew_id in self.idle.least_recently_touched(waiting, excess):
            self.sleep(crew_id, SleepReason.CAPACITY, None)

    # -- ending (CrewSupervisor.end, rt.fleet.stop) -----------------------------------

    def end(self, crew_id: CrewId, order: End) -> bool:
        """Make the crew fail with ``order``'s cause whatever its state; ``False`` if
        there is nothing to end (see :func:`~orkeon_actors.lifecycle.finish_transitions.end_crew`)."""
        return end_crew(self, crew_id, order)

    # -- queries ----------------------------------------------------------------------

    def state_of(self, crew_id: CrewId) -> LifecycleState:
        entry = self.entries.get(crew_id)
        if entry is not None:
            return entry.state
        outcome = self.outcomes.get(crew_id)
        if outcome is not None:
            return LifecycleState.COMPLETED if outcome.status is CrewStatus.COMPLETED else LifecycleState.FAILED
        stored = self.store.stored_state(crew_id)
        if stored is None:
            kept = self.sup.outcome_book.load(crew_id)
            if kept is None:
                return LifecycleState.UNKNOWN
            return LifecycleState.COMPLETED if kept.status is CrewStatus.COMPLETED else LifecycleState.FAILED
        return LifecycleState.FAILED if stored is StoredState.FAILED else LifecycleState.ASLEEP

    def crew_states(self) -> dict[CrewId, LifecycleState]:
        states = {crew_id: entry.state for crew_id, entry in self.entries.items()}
        for crew_id, outcome in self.outcomes.items():
            states.setdefault(
                crew_id,
                LifecycleState.COMPLETED if outcome.status is CrewStatus.COMPLETED else LifecycleState.FAILED,
            )
        return states

    def outcome_of(self, crew_id: CrewId) -> CrewOutcome | None:
        outcome = self.outcomes.get(crew_id)
        return outcome if outcome is not None or crew_id in self.entries else self.sup.outcome_book.load(crew_id)

    def status_of(self, crew_id: CrewId) -> CrewStatus | None:
        if crew_id in self.entries:
            return self.shared.status.get(crew_id)
        outcome = self.outcomes.get(crew_id)
        return None if outcome is None else outcome.status

    def bookkeeping(self) -> dict[str, int]:
        """The sizes of every map the supervisor keeps (see ``CrewSupervisor.bookkeeping``)."""
        shared = self.shared
        with shared.lock:
            sizes = {
                "entries": len(self.entries),
                "outcomes": len(self.outcomes),
                "live": len(shared.live),
                "status": len(shared.status),
                "kept_read": len(shared.kept_read),
                "activating": len(shared.activating),
                "handed": len(shared.handed),
                "in_flight": len(shared.in_flight),
                "patterns": len(shared.patterns),
                "transient_patterns": len(shared.transient),
                "durable_live": len(shared.durable_live),
                "live_kept": len(shared.live_kept),
                "reflected_in_flight": len(shared.reflected_in_flight),
                "checkpoint_due": len(shared.checkpoint_due),
                "checkpoint_waits": len(shared.checkpoint_waits),
            }
        sizes.update(self.idle.sizes())
        sizes.update(self.waits.sizes())
        return sizes

    def ref_of(self, crew_id: CrewId) -> pykka.ActorRef[CrewActor] | None:
        entry = self.entries.get(crew_id)
        return None if entry is None else entry.ref

    def wake(self, crew_id: CrewId, trigger: Message | None) -> bool:
        return wake_crew(
            self, crew_id, trigger, time.perf_counter(), cause=WakeTrigger.EXPLICIT if trigger is None else None
        )

    # -- shutdown ---------------------------------------------------------------------

    def shutdown_round(self) -> list[Future[bool]]:
        """Stop waking crews; ask every unfinished live crew to sleep. Returns one
        future per crew not asleep yet (``False``: refused or failed, ask again)."""
        self.shutting_down = True
        futures: list[Future[bool]] = []
        for crew_id, entry in list(self.entries.items()):
            if entry.finished or entry.stopping:
                continue
            future: Future[bool] = Future()
            if entry.state is LifecycleState.SNAPSHOTTING:
                entry.sleepers.append(future)
            else:
                self.sleep(crew_id, SleepReason.SHUTDOWN, future)
            futures.append(future)
        return futures

    def stop_rest(self, asked: bool) -> tuple[list[Future[None]], list[pykka.Future[bool]]]:
        """Stop every crew still live. A finished one releases its mailboxes. An
        unfinished one (it did not sleep) stops as a crash would, but without losing
        anything: its mailboxes are parked (they stay durably registered, consumed
        messages stay kept), so the next boot restores it from its last snapshot and
        redelivers them. Returns futures set once each crew parked, and once each
        finished crew stopped."""
        self.shutting_down = True
        parked: list[Future[None]] = []
        stopped: list[pykka.Future[bool]] = []
        for crew_id, entry in self.entries.items():
            if entry.stopping:
                continue
            entry.stopping = True
            self.idle.forget(crew_id)
            self.shared.end_checkpoint(crew_id, None)  # no checkpoint commits any more
            for _, sleeper in entry.deferred_sleeps:
                if sleeper is not None:
                    sleeper.set_result(False)
            entry.deferred_sleeps.clear()
            if entry.finished:
                stopped.append(entry.ref.stop(block=False))  # its future is False if already dead
                continue
            (logger.warning if asked else logger.debug)(
                "crew {}: parked at stop ({}{}); the next boot restores it from its last snapshot",
                crew_id,
                entry.state.value,
                ", it did not sleep in time" if asked else "",
            )
            done: Future[None] = Future()
            entry.parked = done
            try:
                entry.ref.tell(Release(self.inbox, ReleasePurpose.SHUTDOWN))
            except pykka.ActorDeadError:
                self._parked_at_stop(crew_id)
            parked.append(done)
        return parked, stopped

    def _parked_at_stop(self, crew_id: CrewId) -> None:
        """A crew ``stop_rest`` released parked its mailboxes (or its actor was dead
        already): its acknowledgements are no longer deferred; ``stop()`` stops waiting
        for it. A report arriving after the supervisor stopped is dropped: the crew's
        rows then simply stay kept, as they do anyway for the next boot."""
        self.hub.end_deferral(crew_id)
        entry = self.entries.get(crew_id)
        if entry is not None and entry.parked is not None and not entry.parked.done():
            entry.parked.set_result(None)

    def on_stop(self) -> None:
        self.bursts.end()
        self.waits.stop()
        self.idle.stop()
        for crew_id in list(self.shared.checkpoint_due):
            self.shared.end_checkpoint(crew_id, None)
        for entry in self.entries.values():
            if entry.stopping:
                continue  # stop() stopped it already
            try:
                if entry.finished:
                    entry.ref.stop(block=False)
                else:  # the actor was stopped without CrewSupervisor.stop(): park, never unregister
                    entry.ref.tell(Release(None, ReleasePurpose.SHUTDOWN))
            except pykka.ActorDeadError:
                continue
