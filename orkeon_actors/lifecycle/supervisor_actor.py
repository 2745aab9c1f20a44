"""``SupervisorActor``: the one actor that owns the lifecycle of every crew of a
supervisor (Orkeon EventHub & Crew Lifecycle specification, §7); see
:mod:`orkeon_actors.lifecycle.supervisor` for the states and guarantees.

Every transition runs in one of its turns: it tells crews the commands of
:mod:`orkeon_actors.crew.protocol` and handles their reports, the store writer's
callbacks and its own timers as messages, never waiting for another actor. The turns
share one state that no other thread touches: the actor's ``entries`` (a
:class:`~orkeon_actors.lifecycle.supervisor_state.CrewEntry` per live crew),
``outcomes`` and ``shutting_down``, next to the collaborators it drives (activator,
idle detector, wait scheduler) and the lock-protected ``SharedState`` that publishers
and crews read. This module holds that state, the dispatch of every message to its
transition, and the turns the blocking facade calls (boot, spawn, queries, shutdown).
The transitions themselves are plain functions of this state (they take the actor),
one module per group, each called only from these turns:

* :mod:`~orkeon_actors.lifecycle.sleep_transitions`: ``Active`` → ``Snapshotting`` →
  ``Asleep`` or back to ``Active``, and the sleep triggers (idle, ``max_active``);
* :mod:`~orkeon_actors.lifecycle.checkpoint`: the sleep's snapshot transaction without
  the sleep (a new cursor made durable);
* :mod:`~orkeon_actors.lifecycle.wake_transitions`: ``Asleep`` → ``Activating`` →
  ``Active``, the triggers that wake a crew and the handover;
* :mod:`~orkeon_actors.lifecycle.expiry_wakes`: the durable wait scheduler's ticks,
  with backpressure, and the burst collections;
* :mod:`~orkeon_actors.lifecycle.finish_transitions`: ``Completed`` / ``Failed``,
  ``end``, the outcomes kept.

They import each other one way only: the sleep transitions use the finish, expiry and
wake ones, finishing uses expiry and wake, expiry uses wake, and the wake and checkpoint
transitions import none; a transition that needs a group it may not import goes
through this actor's methods (``sleep``, ``register_crew``, ``activated``,
``parked_at_stop``). A transition
that raises is logged and the supervisor goes on with its next message.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import pykka
from loguru import logger

from orkeon_actors.crew.crew_actor import CrewActor, start_crew
from orkeon_actors.crew.protocol import (
    Closed,
    CursorsOpen,
    End,
    Passivated,
    Release,
    Released,
    ReleasePurpose,
    SleepRefused,
    SnapshotTaken,
)
from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.lifecycle.burst_gc import BurstCollections
from orkeon_actors.lifecycle.checkpoint import take_checkpoint
from orkeon_actors.lifecycle.expiry_wakes import burst_check, expiry_tick
from orkeon_actors.lifecycle.finish_transitions import crew_finished, crew_gone, end_crew
from orkeon_actors.lifecycle.metrics import WakeTrigger
from orkeon_actors.lifecycle.ports import LifecycleState, SleepReason, StoredState
from orkeon_actors.lifecycle.sleep_transitions import (
    back_to_active,
    enforce_cap,
    released,
    request_sleep,
    saved,
    sleep_if_idle,
    snapshot_taken,
    snapshotted,
)
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
    tell_supervisor,
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
            snapshot_taken(self, message)
        elif isinstance(message, Passivated):
            snapshotted(self, message.crew_id)
        elif isinstance(message, SleepRefused):
            back_to_active(self, message.crew_id, f"refused: {message.reason}", failed=False)
        elif isinstance(message, SaveFailed):
            back_to_active(self, message.crew_id, f"snapshot write failed: {message.error}", failed=True)
        elif isinstance(message, Saved):
            saved(self, message.crew_id)
        elif isinstance(message, Released):
            released(self, message)
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
        """Start the crew's actor from the factory registered under ``name`` (its work not
        begun: ``spawn`` begins it, a wake restores it) and register it as live here.
        ``InvalidArgumentError`` if no factory is registered under ``name``."""
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
        """The crew is ``Active``: its idle count starts, and the ``max_active`` cap may
        put the least recently touched waiting crews to sleep."""
        entry.state = LifecycleState.ACTIVE
        self.idle.watch(crew_id, entry.idle_timeout)
        enforce_cap(self)

    # -- sleep (CrewSupervisor.sleep, the idle detector) -------------------------------

    def sleep(self, crew_id: CrewId, reason: SleepReason, future: Future[bool] | None) -> None:
        """Ask the crew to sleep; ``future`` (if any) is set once it slept (``True``) or
        did not (see :func:`~orkeon_actors.lifecycle.sleep_transitions.request_sleep`)."""
        request_sleep(self, crew_id, reason, future)

    def _idle(self, crew_id: CrewId) -> None:
        """The idle detector's callback, run in this actor's turn (an ``IdleCheck``)."""
        sleep_if_idle(self, crew_id)

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
            entry.refuse_deferred_sleeps()
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
                self.parked_at_stop(crew_id)
            parked.append(done)
        return parked, stopped

    def parked_at_stop(self, crew_id: CrewId) -> None:
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
