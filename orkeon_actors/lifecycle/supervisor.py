"""``CrewSupervisor``: one actor owning the lifecycle of every crew (spec §7).

States: ``Active`` → ``Snapshotting`` → ``Asleep`` → ``Activating`` → ``Active``, and
``Completed`` / ``Failed``. The supervisor actor serialises every transition; it never
waits for another actor (it *tells* crews, the store writer calls back after commit).

* **Sleep** (explicit, idle, or over the ``max_active`` cap): the crew (on its own
  thread) refuses unless it is waiting for a message; else it hands its snapshot over,
  withdraws its live waits, and the snapshot plus its ``pending_waits`` rows are written
  in one transaction. On failure the crew re-arms its waits and stays active. After the
  commit its mailboxes are *parked* (kept durably, no actor) and the actor stops: a
  sleeping crew owns zero actors and zero threads.
* **Wake**: a post kept for a parked mailbox, a published message matching a sleeping
  wait (topic pattern, scope, metadata), a reply to a sleeping requester, or a finite
  expiry found by the durable wait scheduler. The crew is rebuilt by the factory
  registered under its name, restored from its snapshot, and the trigger delivered to
  the waiting agent as its tool result (a timeout as §9.2's ``WaitTimedOutMessage``).
  Triggers arriving while a crew snapshots or activates are kept and delivered in order.
* **Lazy boot**: starting reads only the wait index (distinct topic patterns, a window
  of the nearest expiries, mailboxes holding kept posts); nothing wakes except crews
  with an expiry already past or kept mail.
* **Acknowledgement with the snapshot**: the hub defers the acknowledgement of every
  mailbox message a managed crew consumes (``SqliteEventHub.defer_acks``); its row is
  deleted, and its ``processed_messages`` row written, in the transaction of the crew's
  next snapshot (or of its completion/failure record). A crash while the crew is active
  restores it from its last snapshot and redelivers, in order, exactly the messages that
  snapshot does not reflect.
* **Stop** puts every live crew to sleep (graceful shutdown) and keeps the durable
  registrations of every unfinished crew: after a restart each one is asleep (or, if it
  could not sleep in time, restored from its last snapshot with its messages redelivered)
  and posts to it are accepted and wake it.

The supervisor composes the other ports' implementations, all driven on its thread:
:class:`~orkeon_actors.lifecycle.activation.SnapshotActivator` (wake),
:class:`~orkeon_actors.lifecycle.idle.CrewIdleDetector` (idle sleeps, the cap's LRU
order), :class:`~orkeon_actors.lifecycle.wait_scheduler.DurableWaitScheduler`
(expiries), and records :mod:`~orkeon_actors.lifecycle.metrics` (OpenTelemetry
instruments, structured transition logs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from datetime import timedelta
from typing import Any

import pykka
from loguru import logger
from opentelemetry.metrics import MeterProvider

from orkeon_actors.acl.links import validate_crew_name
from orkeon_actors.actors.caller_runs import may_wait_here
from orkeon_actors.actors.exit import forget_at_exit, stop_at_exit
from orkeon_actors.crew.crew_actor import CrewActor
from orkeon_actors.crew.protocol import End
from orkeon_actors.crew.snapshot import CrewOutcome
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import HubStoppedError, InvalidArgumentError, StoreError
from orkeon_actors.hub.port import POST_TOPIC, REPLY_TOPIC, SEND_TOPIC
from orkeon_actors.hub.routing import cursor_matches, topic_matches
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.lifecycle.activation import CrewBlueprint, CrewFactory, CrewSource, SnapshotActivator
from orkeon_actors.lifecycle.checkpoint import note_waiting, settle_waiting
from orkeon_actors.lifecycle.finished import wait_finished
from orkeon_actors.lifecycle.idle import CrewIdleDetector
from orkeon_actors.lifecycle.metrics import LifecycleStats
from orkeon_actors.lifecycle.ports import LifecycleHost, LifecycleState, OutcomeCallback, SleepReason
from orkeon_actors.lifecycle.supervisor_actor import SupervisorActor
from orkeon_actors.lifecycle.supervisor_state import (
    Call,
    CheckpointDue,
    Dispatched,
    Finished,
    IdleCheck,
    Routing,
    SharedState,
    Tick,
)
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

__all__ = ["CrewBlueprint", "CrewFactory", "CrewSupervisor", "LifecycleStats"]

_PARK_GRACE = 5.0
"""Seconds ``stop()`` waits, past its timeout, for crews it could not put to sleep to
park their mailboxes (a crew blocked in a tool or model call parks once it returns)."""


class _Triggers:
    """The supervisor's :class:`~orkeon_actors.hub.port.DispatchObserver`: how it hears
    of the triggers of sleeping crews (on the dispatching threads)."""

    __slots__ = ("sup",)

    def __init__(self, sup: CrewSupervisor) -> None:
        self.sup = sup

    def routing(self, message: Message) -> None:
        self.sup.on_route(message)

    def dispatched(self, message: Message) -> None:
        self.sup.on_dispatch(message)


class CrewSupervisor:
    """The lifecycle manager of one durable runtime (``Runtime.start(store=...)``).

    ::

        sup = CrewSupervisor.start(rt, idle_timeout=300, max_active=1000)
        sup.register_factory("orders", lambda crew_id: CrewBlueprint(agents=[...], orchestration=...))
        sup.spawn("orders", "orders-1")
        sup.sleep("orders-1")            # True once asleep

    A crew's *name* finds its factory at wake time: models and tools are code, not
    data, so every process that may wake a crew registers the same factories before
    messages arrive: pass them as ``factories={name: fn}`` so they exist before the
    boot wakes crews whose expiry passed or whose mailboxes hold posts (a wake whose
    factory is missing is logged and the crew stays asleep). ``idle_timeout`` (seconds,
    default: the blueprint's or class's)
    puts waiting crews to sleep; ``max_active`` caps live crews (least recently used
    waiting crews sleep first); ``window`` / ``window_size`` bound the expiries held in
    memory. ``meter_provider`` receives the lifecycle metrics (asleep gauge, sleep and
    wake counters, wake latency histogram: :mod:`orkeon_actors.lifecycle.metrics`);
    ``None`` uses the global provider. A finished crew's actor stops once its outcome is
    durable; :meth:`outcome` answers for the last ``finished_memory`` finished crews.
    ``burst_collections=False`` leaves CPython's collection thresholds alone during a
    burst of expiries (by default its full collections are postponed, bounded:
    :mod:`orkeon_actors.lifecycle.burst_gc`).
    Blocking methods (``spawn``, ``sleep``, ``state``, ``outcome``) block the caller's
    thread only: never call them from an actor.
    """

    def __init__(
        self,
        runtime: LifecycleHost,
        *,
        factories: Mapping[str, CrewSource] | None = None,
        idle_timeout: float | None = None,
        max_active: int | None = None,
        window: float = 60.0,
        window_size: int = 10_000,
        meter_provider: MeterProvider | None = None,
        finished_memory: int = 10_000,
        burst_collections: bool = True,
    ) -> None:
        backend = runtime.lifecycle_backend()  # InvalidArgumentError for a runtime that is not durable
        hub = self.hub = backend.hub
        self.store = backend.states
        self.wakes = backend.wakes
        self.expiries = backend.expiries
        self.idle_timeout = idle_timeout
        self.max_active = max_active
        self.window = window
        self.window_size = window_size
        self.factories: dict[str, CrewSource] = dict(factories or {})
        for name in self.factories:
            validate_crew_name(name, what="factory name")  # no reserved name (_system, client:...)
        if isinstance(finished_memory, bool) or not isinstance(finished_memory, int) or finished_memory < 0:
            raise InvalidArgumentError(
                f"finished_memory must be a number of crews (an int >= 0), got {finished_memory!r}"
            )
        self.finished_memory = finished_memory
        self.burst_collections = burst_collections
        """Postpone CPython's full collections while a burst of expiries runs
        (:mod:`orkeon_actors.lifecycle.burst_gc`)."""
        if idle_timeout is not None and (isinstance(idle_timeout, bool) or not idle_timeout > 0):
            raise InvalidArgumentError(
                f"idle_timeout must be a positive number of seconds or None, got {idle_timeout!r}"
            )
        self.shared = SharedState()
        self.stats = LifecycleStats(meter_provider)
        self.idle = CrewIdleDetector(hub.clock, hub.scheduler, self._idle_timer)
        self.activator = SnapshotActivator(
            hub,
            self.store,
            self.factories,
            idle_timeout=idle_timeout,
            on_activity=self._on_activity,
            on_cursor=self.shared.cursor_opened,
            on_checkpoint=self.shared.checkpoint_new,
        )
        self.outcome_book = backend.outcomes
        """The durable outcomes of finished crews and their watchers (``when_finished``)."""
        self._ref = SupervisorActor.start(self)
        self._stopped = False
        self._observer = _Triggers(self)
        hub.add_dispatch_observer(self._observer)
        self.booted_asleep: int = self._call(lambda actor: actor.boot())
        stop_at_exit(self)  # stopped (crews put to sleep) before its runtime at interpreter exit
        self._runtime_supervisors: list[Any] = runtime.supervisors
        self._runtime_supervisors.append(self)  # what observers (the Studio) enumerate

    @classmethod
    def start(cls, runtime: LifecycleHost, **options: Any) -> CrewSupervisor:
        return cls(runtime, **options)

    def _call(self, fn: Callable[[SupervisorActor], Any], timeout: float | None = 30.0) -> Any:
        """Run ``fn(actor)`` in the supervisor actor's turn; block for its result."""
        future: Future[Any] = Future()
        self._ref.tell(Call(fn, future))
        return future.result(timeout)

    # -- hooks (other threads) ----------------------------------------------------------

    def on_route(self, message: Message) -> None:
        """Before ``message`` is routed (publisher thread): queue its durable copy for the
        live crews with a durable cursor it matches (:meth:`_keep_for_live`), note it in
        flight, and tell the actor if a crew whose cursors are closed may want it (see
        ``_wake``)."""
        shared = self.shared
        shared.in_flight[message.id] = message
        if shared.live_view and not message.topic.startswith("_system."):
            self._keep_for_live(message)
        if shared.checkpoint_due and not message.topic.startswith("_system.") and may_wait_here():
            waiting = note_waiting(shared.checkpoint_due, message)
            if waiting:
                shared.checkpoint_waits[message.id] = waiting
        view = shared.handover_view
        if view and any(topic_matches(p, message.topic) for p in view):
            try:
                self._ref.tell(Routing(message))
            except pykka.ActorDeadError:
                logger.debug("lifecycle supervisor stopped: {} not kept", message.id)

    def _keep_for_live(self, message: Message) -> None:
        """Queue the durable copy of a topic ``message`` for every live crew restored
        from a snapshot whose durable cursors (those of that snapshot, minus the ones
        it opted out of) it matches: the ``cursor_events`` rows a sleeping crew uses.
        Queued *before* the router hands the message to any cursor, so every message a
        crew's next snapshot reflects was written before that snapshot's transaction,
        which deletes it (``SnapshotTaken.reflected_events``); the publisher waits for
        the commit in :meth:`on_dispatch`. A crash before the next snapshot restores
        the crew from the last one, and its wake hands these events over: none lost,
        none handed out twice."""
        shared = self.shared
        topic = message.topic
        patterns = [p for p in shared.live_view if topic_matches(p, topic)]
        if not patterns:
            return
        durable = shared.durable_live
        keys: dict[CrewId, list[str]] = {}
        try:
            for crew, key, cursor_topic, match in self.wakes.sleeping_cursors(patterns):
                if cursor_topic in durable.get(crew, ()) and cursor_matches(cursor_topic, match, crew, message):
                    keys.setdefault(crew, []).append(key)
            if keys:
                waiter = self.wakes.keep_for_sleepers(keys, message, lambda _crew: False)
                shared.live_kept[message.id] = (waiter, frozenset(keys))
        except (HubStoppedError, StoreError) as exc:
            logger.error("topic event {} not kept for its live crews' cursors: {}", message.id, exc)

    def on_dispatch(self, message: Message) -> None:
        """After ``message`` was routed (its publisher's thread): the sleeping crews'
        keeping (:meth:`_dispatched`), then the waits for the durable copies queued
        before routing (:meth:`_keep_for_live`) and for the checkpoints of the crews
        whose new cursors it matches (:mod:`~orkeon_actors.lifecycle.checkpoint`)."""
        shared = self.shared
        live = shared.live_kept.pop(message.id, None) if shared.live_kept else None
        waiting = shared.checkpoint_waits.pop(message.id, None) if shared.checkpoint_waits else None
        try:
            self._dispatched(message, live[1] if live is not None else frozenset())
            if waiting:
                settle_waiting(self.wakes, message, waiting)
        finally:
            if live is not None and may_wait_here():  # the writer's own thread: queued, committed after this batch
                try:
                    live[0].wait()
                except HubStoppedError:
                    logger.debug("topic event {} not kept for live crews: the store is closed", message.id)
                except StoreError as exc:  # published already: the live cursors have it, not durably
                    logger.error("topic event {} not kept for its live crews' cursors: {}", message.id, exc)

    def _dispatched(self, message: Message, kept_live: frozenset[CrewId] = frozenset()) -> None:
        """After ``message`` was routed (on the thread that dispatched it: a topic
        message's publisher or the outbox dispatcher, which may wait for the store
        writer; a post or reply may come from the writer's thread and never waits).
        ``kept_live``: the live crews :meth:`_keep_for_live` kept it for.

        A topic message matching a sleeping crew's cursor is kept durably for it
        (:meth:`_keep_for_sleepers`): the write is queued first, then the actor is told
        (so the read of kept events by a wake it decides is queued after that write),
        and the message leaves ``in_flight`` once the actor handled ``Dispatched`` (a
        wake decided before that adopts it from there, in routing order with the
        messages routed after it; one decided after hears of it from ``Dispatched``);
        then the publisher waits for the commit. A failure to keep is logged; the wake
        goes on without the durable copy."""
        shared = self.shared
        topic = message.topic
        kept: Waiter[None] | None = None
        if topic in (POST_TOPIC, SEND_TOPIC, REPLY_TOPIC):
            target = message.target_crew_id
            if target is not None and target in shared.live:
                shared.done_routing(message.id)
                return
        else:
            patterns = [p for p in shared.pattern_view if topic_matches(p, topic)]
            if not patterns:
                shared.done_routing(message.id)
                return
            try:
                kept = self._keep_for_sleepers(message, patterns, kept_live)
            except (HubStoppedError, StoreError) as exc:
                logger.error("topic event {} not kept for its sleeping crews: {}", message.id, exc)
        try:
            self._ref.tell(Dispatched(message))  # the actor takes it out of ``in_flight``
        except pykka.ActorDeadError:
            shared.done_routing(message.id)
            logger.debug("lifecycle supervisor stopped: trigger {} not routed", message.id)
        try:
            if kept is None or not may_wait_here():  # the writer's own thread cannot wait for its commit
                return
            kept.wait()
        except HubStoppedError:
            logger.debug("topic event {} not kept for sleeping crews: the store is closed", message.id)
        except StoreError as exc:  # published already: the wake goes on, not durably
            logger.error("topic event {} not kept for its sleeping crews: {}", message.id, exc)

    def _keep_for_sleepers(
        self, message: Message, patterns: Sequence[str], kept_live: frozenset[CrewId] = frozenset()
    ) -> Waiter[None] | None:
        """Queue the durable copy of ``message`` for every crew with a cursor (a parked
        ``wait_for_event`` included) it matches that is asleep, or woken but not yet past
        the read of its kept events, when the write runs; ``None`` if no crew has such a
        cursor. The wake it causes reads it back and hands it over (once: by id); if the
        process dies first, the next boot wakes the crew with it, so a crash loses no
        topic trigger of a sleeping crew. A crew past that read is skipped (its handover
        or its live cursors have the message: ``Dispatched``, ``in_flight``) unless the
        message is for one of its durable cursors and was routed before the crew went
        live (not in ``kept_live``: :meth:`_keep_for_live` did not keep it). Its row
        then comes after the wake's read, and the crew's next snapshot deletes it with
        the events it reflects; without it a crash before that snapshot would lose an
        event whose publish returned."""
        if message.topic.startswith("_system."):
            return None
        shared = self.shared
        durable = shared.durable_live
        keys: dict[CrewId, list[str]] = {}
        # The crews whose committed snapshot reflects it (handed it while this publisher
        # stalled): the set the saves add to after their commit (``saved_reflecting``).
        reflecting = shared.reflected_in_flight.setdefault(message.id, set())
        for crew, key, topic, match in self.wakes.sleeping_cursors(patterns):
            if crew in kept_live or crew in reflecting:
                continue
            if crew in shared.kept_read and topic not in durable.get(crew, ()):
                continue
            if cursor_matches(topic, match, crew, message):
                keys.setdefault(crew, []).append(key)
        if not keys:
            return None
        # Decided in the writer, in order with the wakes' reads and the saves' commits: a
        # crew whose snapshot reflecting it committed meanwhile is skipped, or its next
        # wake would hand it over twice.
        return self.wakes.keep_for_sleepers(
            keys,
            message,
            lambda crew: (crew in shared.kept_read and crew not in durable) or crew in reflecting,
        )

    def _idle_timer(self, crew_id: CrewId) -> None:
        try:
            self._ref.tell(IdleCheck(crew_id))
        except pykka.ActorDeadError:
            return

    def _on_activity(self, crew_id: CrewId, status: CrewStatus) -> None:
        shared = self.shared
        if crew_id not in shared.live:
            return  # asleep or finished and forgotten: a late report must not be recorded again
        watch = shared.stop_watch
        if watch is not None and status is not CrewStatus.RUNNING:
            watch.set()  # stop() asks the crews that refused to sleep (they were working) again
        self.idle.touch(crew_id)
        if status is CrewStatus.WAITING and shared.checkpoint_due and shared.checkpoint_asked(crew_id):
            try:
                self._ref.tell(CheckpointDue(crew_id))
            except pykka.ActorDeadError:
                return
        if crew_id in shared.handed and shared.restored(crew_id):
            try:
                self._ref.tell(Tick())
            except pykka.ActorDeadError:
                return
        previous = shared.status.get(crew_id)
        shared.status[crew_id] = status
        if status in (CrewStatus.COMPLETED, CrewStatus.FAILED) and previous is not status:
            try:
                self._ref.tell(Finished(crew_id, status))
            except pykka.ActorDeadError:
                return

    # -- API ----------------------------------------------------------------------------

    def register_factory(self, name: str, factory: CrewSource) -> None:
        """Register how to build crews named ``name`` (at spawn and at every wake): a
        factory, or a :class:`CrewBlueprint` shared by all of them (``CrewSource``).
        Raises :class:`~orkeon_actors.acl.AclConfigError` for a name a crew may not
        take (a reserved one: ``_system``, any ``_...`` or ``client:...``)."""
        validate_crew_name(name, what="factory name")
        self.factories[name] = factory

    def spawn(self, name: str, crew_id: CrewId | str | None = None, *, checkpoint: bool = False) -> CrewId:
        """Start a new crew from the factory ``name``; returns its id. A crew that never
        slept has no snapshot until its first checkpoint (one is taken before an agent's
        posts and sends run): a crash before it loses it (its consumed posts stay kept). With
        ``checkpoint`` it is checkpointed at its first wait for a message (the sleep's
        snapshot transaction without the sleep, as for a new cursor: :meth:`durable` is
        ``False`` until it commits); from then on a crash restores it and hands it the
        posts it consumed since, once each. It costs one snapshot transaction per spawn."""
        validate_crew_name(name, what="crew name")  # a reserved name never names a crew
        crew = CrewId(crew_id) if crew_id is not None else CrewId.new()
        if checkpoint:
            self.shared.checkpoint_new(crew)
        try:
            result: CrewId = self._call(lambda actor: actor.spawn(name, crew))
        except BaseException:
            if checkpoint:
                self.shared.end_checkpoint(crew, None)
            raise
        return result

    def sleep(self, crew_id: CrewId | str, reason: SleepReason = SleepReason.EXPLICIT, timeout: float = 30.0) -> bool:
        """Passivate the crew; ``True`` once it is asleep (or already was), ``False`` if
        it was not waiting for a message or its snapshot could not be written."""
        future: Future[bool] = Future()
        crew = CrewId(crew_id)
        self._call(lambda actor: actor.sleep(crew, reason, future))
        return future.result(timeout)

    def wake(self, crew_id: CrewId | str, trigger: Message | None = None) -> None:
        """Activate a sleeping crew now (its waits re-armed; ``trigger`` delivered)."""
        crew = CrewId(crew_id)
        self._call(lambda actor: actor.wake(crew, trigger))

    def end(
        self, crew_id: CrewId | str, error_type: str = "CrewEnded", reason: str = "ended by its supervisor"
    ) -> bool:
        """Make the crew fail now with the cause ``error_type`` / ``reason``, whatever its
        state; ``True`` if it will, ``False`` if it finished already or is unknown here.
        Returns at once: its outcome is recorded like any failed crew's (its snapshot
        deleted, its mailboxes closed; wait with :meth:`when_finished` or
        :meth:`wait_finished`). A live or waking crew handles it between two turns; one
        falling asleep does not sleep (or, if its actor was already stopping for the
        sleep, is woken once the sleep committed and ended then); a sleeping crew is
        woken (its factory builds it, its snapshot restores it) and ended before any
        message posted to it after this call, while a message kept for it before may
        still reach an agent first. ``HubStoppedError`` once :meth:`stop` began."""
        crew, order = CrewId(crew_id), End(error_type, reason)
        result: bool = self._call(lambda actor: actor.end(crew, order))
        return result

    def state(self, crew_id: CrewId | str) -> LifecycleState:
        crew = CrewId(crew_id)
        result: LifecycleState = self._call(lambda actor: actor.state_of(crew))
        return result

    def crews(self) -> dict[CrewId, LifecycleState]:
        """Every crew this supervisor knows now and its state: the live ones (active,
        snapshotting, activating, and those it put to sleep in this process) and the
        finished ones it still remembers (see :meth:`outcome`). Crews asleep since before
        this process started are in the store, not here."""
        result: dict[CrewId, LifecycleState] = self._call(lambda actor: actor.crew_states())
        return result

    def ref(self, crew_id: CrewId | str) -> pykka.ActorRef[CrewActor] | None:
        """The live crew actor, or ``None`` while it sleeps and once it finished (its
        actor stops once its outcome is durable: see :meth:`outcome`)."""
        crew = CrewId(crew_id)
        result: pykka.ActorRef[CrewActor] | None = self._call(lambda actor: actor.ref_of(crew))
        return result

    def outcome(self, crew_id: CrewId | str) -> CrewOutcome | None:
        """The outcome (status, result, failure, final state) of a finished crew, once
        its actor stopped: from memory for the last ``finished_memory`` crews finished
        in this process, else from the store's ``crew_outcomes`` (kept across restarts
        for ``PurgePolicy.outcome_retention``, ``failed_retention`` for a failed crew);
        ``None`` before it finished, for an unknown crew, or once purged."""
        crew = CrewId(crew_id)
        result: CrewOutcome | None = self._call(lambda actor: actor.outcome_of(crew))
        return result

    def when_finished(self, crew_id: CrewId | str, callback: OutcomeCallback) -> Callable[[], None]:
        """Call ``callback(outcome)`` once the crew's outcome is durable: at once, on
        this thread, if it already is, else on the store writer's thread after the
        commit. Never blocks; ``callback`` must not block either. Returns a function
        withdrawing the callback. See :mod:`orkeon_actors.lifecycle.finished`."""
        return self.outcome_book.when_finished(CrewId(crew_id), callback)

    def wait_finished(self, crew_id: CrewId | str, timeout: float | timedelta | None = None) -> CrewOutcome:
        """Block until the crew finishes; return its outcome if it completed. Raises
        ``CrewFailedError`` if it failed, ``CrewWaitTimeoutError`` after ``timeout``
        (seconds or a ``timedelta``, however large; ``None``: no limit),
        ``CrewNotFoundError`` for a crew unknown here."""
        return wait_finished(self, CrewId(crew_id), timeout)

    def bookkeeping(self) -> dict[str, int]:
        """The sizes of the supervisor's maps, by name: its live crews (``entries``,
        ``live``, ``status``, the idle detector's ``idle_*``), the finished crews it
        remembers (``outcomes``: at most ``finished_memory``), crews waking
        (``activating``, ``handed``, ``kept_read``), the topic patterns it watches,
        messages in mid-routing (``in_flight``, ``live_kept``), and the durable wait
        scheduler's window (``expiries_*``). Every one is bounded by the live crews,
        ``finished_memory``, the distinct patterns of sleeping crews or the scheduler's
        ``window_size``, not by how many crews came and went (``orkeon bench lifecycle
        --soak``)."""
        result: dict[str, int] = self._call(lambda actor: actor.bookkeeping())
        return result

    def durable(self, crew_id: CrewId | str) -> bool:
        """Whether every cursor the agents of the live crew ``crew_id`` parked on (but
        those they opted out of, ``Agent.volatile_cursors``) is held by a committed
        snapshot: ``False`` from the moment an agent parks on a new one until the
        checkpoint that makes it durable commits (a publish matching it meanwhile waits
        for that commit, :mod:`~orkeon_actors.lifecycle.checkpoint`). Never blocks."""
        return CrewId(crew_id) not in self.shared.checkpoint_due

    def status(self, crew_id: CrewId | str) -> CrewStatus | None:
        """The crew's :class:`CrewStatus`: the last one its actor reported while it is
        live (``WAITING`` once every agent is parked, ...), its outcome's once it
        finished (as :meth:`outcome`); ``None`` while it sleeps or is unknown here."""
        crew = CrewId(crew_id)
        result: CrewStatus | None = self._call(lambda actor: actor.status_of(crew))
        return result

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful shutdown: put every live, unfinished crew to sleep, then stop.

        From the call on no crew wakes (posts stay kept, expiries indexed: the next boot
        wakes them). Each live crew is asked to sleep (``SleepReason.SHUTDOWN``); a crew
        that refuses because it is working is asked again until it sleeps or
        ``timeout`` seconds passed. A crew still not asleep then is stopped with its
        mailboxes *parked*, like after a crash but without one: the next boot restores
        it from its last snapshot and redelivers, in order, the messages it consumed
        since (a crew that never slept has no snapshot to restore and is not
        recovered; the messages stay kept). ``timeout=0`` asks no crew to sleep: every
        live crew is parked at once (a fast stop that leaves the store as a crash would,
        minus the crash). Finished crews stop. Either way every unfinished crew's
        mailboxes stay durably registered: after a restart, posts to them are accepted
        and wake the crew. Idempotent. A topic message published meanwhile is kept for
        the crews asleep (or falling asleep) with a cursor it matches; one for a crew
        parked without sleeping is not (publishes are live-only for live crews)."""
        if timeout < 0:
            raise InvalidArgumentError(f"stop(timeout={timeout}): give seconds >= 0 (0 parks every crew at once)")
        if self._stopped:
            return
        self._stopped = True
        forget_at_exit(self)
        deadline = time.monotonic() + timeout
        try:
            while timeout > 0:
                # Set by the next report of a live crew that is not running: a crew
                # refuses while it works and reports its status after every turn.
                watch = self.shared.stop_watch = threading.Event()
                futures: list[Future[bool]] = self._call(lambda actor: actor.shutdown_round())
                remaining = deadline - time.monotonic()
                if not futures or remaining <= 0:
                    break
                done, _ = wait_futures(futures, timeout=remaining)
                if all(f.result() for f in done) and len(done) == len(futures):
                    continue  # all asleep: the next round finds none (or crews woken meanwhile)
                # A refusing crew is working: ask again once a crew did something, not on a poll.
                if not watch.wait(max(0.0, deadline - time.monotonic())):
                    break
            parked, stopped = self._call(lambda actor: actor.stop_rest(asked=timeout > 0))
            _, late = wait_futures(parked, timeout=max(0.0, deadline - time.monotonic()) + _PARK_GRACE)
            if late:  # blocked in a tool or model call: it parks when that returns, if the hub still runs
                logger.warning("{} crew(s) still busy at stop: parked when they return", len(late))
            for future in stopped:
                try:
                    future.get(timeout=_PARK_GRACE)
                except pykka.Timeout:
                    logger.warning("a finished crew did not stop within {} s", _PARK_GRACE)
        finally:
            self.shared.stop_watch = None
            self.hub.remove_dispatch_observer(self._observer)
            if self in self._runtime_supervisors:
                self._runtime_supervisors.remove(self)
            self._ref.stop()
