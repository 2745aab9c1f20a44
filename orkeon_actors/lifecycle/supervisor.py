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
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any

import apsw
import attrs
import pykka
from loguru import logger
from opentelemetry.metrics import MeterProvider

from orkeon_actors.crew.crew_actor import (
    CrewActor,
    _CloseMailboxes,
    _Deliver,
    _Passivate,
    _Release,
    _Resume,
    hand_over,
    start_crew,
)
from orkeon_actors.crew.snapshot import CrewOutcome, CrewSnapshot
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import HubStoppedError, InvalidArgumentError, StoreError
from orkeon_actors.hub.memory import POST_TOPIC, REPLY_TOPIC, SEND_TOPIC
from orkeon_actors.hub.routing import metadata_allows, scope_allows, topic_matches
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.lifecycle.activation import BuiltCrew, CrewBlueprint, CrewFactory, SnapshotActivator
from orkeon_actors.lifecycle.idle import CrewIdleDetector
from orkeon_actors.lifecycle.metrics import LifecycleStats, WakeTrigger, log_transition
from orkeon_actors.lifecycle.ports import LifecycleState, SleepReason
from orkeon_actors.lifecycle.state_store import SqliteCrewStateStore, snapshot_cursors
from orkeon_actors.lifecycle.wait_scheduler import DurableWaitScheduler
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId, MessageId
from orkeon_actors.model.message import FrozenMap, Message
from orkeon_actors.runtime import Runtime
from orkeon_actors.store import cursor_events
from orkeon_actors.store.acks import ConsumedLedger
from orkeon_actors.store.durable_hub import SqliteEventHub
from orkeon_actors.store.records import CrewState

__all__ = ["CrewBlueprint", "CrewFactory", "CrewSupervisor", "LifecycleStats"]

_SHUTDOWN_RETRY = 0.01
"""Seconds ``stop()`` waits before asking a crew that refused to sleep (working) again."""
_MAX_ACTIVATING = 64
"""Expiries are handed over only while fewer woken crews than this have not yet
restored (see ``_SupervisorActor._tick``)."""
_RESUME_ACTIVATING = 48
"""A deferred expiry tick runs again once at most this many woken crews have not
restored: a batch of at least ``_MAX_ACTIVATING - _RESUME_ACTIVATING`` per tick, not
one tick per restored crew."""
_DEFERRED_TICK = 0.05
"""Seconds after which a deferred expiry tick is tried again even if no restored crew
reported back (a crew actor that died before restoring never does): one such timer
pending at most, which also forgets the activating crews whose actor is dead."""
_PARK_GRACE = 5.0
"""Seconds ``stop()`` waits, past its timeout, for crews it could not put to sleep to
park their mailboxes (a crew blocked in a tool or model call parks once it returns)."""


class _Handover:
    """The topic messages kept for one crew whose cursors are closed while it
    snapshots or activates: those matching any of its cursors (topic pattern, crew
    scope, metadata match), once each, in the order the supervisor heard of them, with
    the events read from the store merged in (see :meth:`merge`)."""

    __slots__ = ("filters", "ids", "messages")

    def __init__(self, filters: Sequence[tuple[str, FrozenMap | None]]) -> None:
        self.filters = tuple(dict.fromkeys(filters))
        self.ids: set[str] = set()
        self.messages: list[Message] = []

    @property
    def patterns(self) -> list[str]:
        return sorted({topic for topic, _ in self.filters})

    def merge(self, stored: Sequence[Message]) -> None:
        """Merge the events kept for the crew in the store (``stored``, in commit order:
        every one was routed before the crew went live, so before its cursors reopened).
        Each one not heard of yet goes right after the stored event before it that was
        (the first ones: in front, kept while it slept), so the handover keeps both the
        store's order and the order heard of; a reopened cursor's catch-up relies on
        what its new subscription holds being the handover's tail."""
        front: list[Message] = []
        after: dict[str, list[Message]] = {}  # id of a stored event heard of -> those that follow it
        following = front
        for message in stored:
            key = str(message.id)
            if key in self.ids:
                following = after.setdefault(key, [])
            else:
                self.ids.add(key)
                following.append(message)
        if not front and not any(after.values()):
            return
        merged = front
        for message in self.messages:  # one pass: up to 10,000 kept events per cursor
            merged.append(message)
            merged.extend(after.get(str(message.id), ()))
        self.messages = merged

    def keep(self, crew_id: CrewId, message: Message) -> bool:
        """Keep ``message`` if it matches a cursor and is not kept yet."""
        key = str(message.id)
        if key in self.ids or message.topic.startswith("_system.") or not scope_allows(crew_id, message):
            return False
        if not any(topic_matches(t, message.topic) and metadata_allows(m, message) for t, m in self.filters):
            return False
        self.ids.add(key)
        self.messages.append(message)
        return True


class _Entry:
    __slots__ = (
        "buffered",
        "carry",
        "cursors_open",
        "deferred_sleeps",
        "finished",
        "handover",
        "idle_timeout",
        "kept_loaded",
        "kept_missed",
        "kept_upto",
        "ledger",
        "name",
        "reason",
        "ref",
        "sleepers",
        "state",
        "stopping",
        "triggers",
        "wake_cause",
    )

    def __init__(
        self, name: str, ref: pykka.ActorRef[CrewActor], idle_timeout: float | None, ledger: ConsumedLedger
    ) -> None:
        self.name = name
        self.ref = ref
        self.ledger = ledger
        """The mailbox messages the crew consumed that no snapshot reflects yet."""
        self.stopping = False
        """Stopped by ``CrewSupervisor.stop()`` (parked if unfinished)."""
        self.state = LifecycleState.ACTIVE
        self.idle_timeout = idle_timeout
        self.buffered: list[Message] = []
        """Non-topic triggers (posts, replies) that arrived while it snapshotted."""
        self.handover: _Handover | None = None
        """Topic messages kept while its cursors are closed (snapshotting, activating)."""
        self.carry: list[Message] = []
        """What its cursors received after its sleep snapshot (told at release)."""
        self.cursors_open = False
        self.deferred_sleeps: list[tuple[SleepReason, Future[bool] | None]] = []
        """Sleep requests made while it was activating: made once it is active."""
        self.kept_loaded = False
        self.kept_missed: dict[str, int] = {}
        self.kept_upto = 0
        """The last ``cursor_events`` row handed over at its wake: deleted by its next snapshot."""
        self.triggers: list[str] = []
        self.sleepers: list[Future[bool]] = []
        self.finished = False
        self.reason = SleepReason.EXPLICIT
        self.wake_cause = ""
        """What woke it (a ``WakeTrigger``), logged when it goes Active."""


# -- actor messages -------------------------------------------------------------------


@attrs.frozen(eq=False)
class _Call:
    fn: Callable[[], Any]
    future: Future[Any]


@attrs.frozen(eq=False)
class _Dispatched:
    message: Message


@attrs.frozen(eq=False)
class _Snapshotted:
    crew_id: CrewId
    snapshot: CrewSnapshot
    consumed: tuple[tuple[str, str], ...]
    """The consumed mailbox rows the snapshot reflects (acknowledged by its save)."""


@attrs.frozen(eq=False)
class _Refused:
    crew_id: CrewId
    reason: str


@attrs.frozen(eq=False)
class _Saved:
    crew_id: CrewId


@attrs.frozen(eq=False)
class _SaveFailed:
    crew_id: CrewId
    error: BaseException


@attrs.frozen(eq=False)
class _Released:
    crew_id: CrewId


@attrs.frozen(eq=False)
class _IdleCheck:
    crew_id: CrewId


@attrs.frozen(eq=False)
class _Finished:
    crew_id: CrewId
    status: CrewStatus


@attrs.frozen(eq=False)
class _Gone:
    """A finished crew's actor stopped (its mailboxes closed, its outcome durable)."""

    crew_id: CrewId
    outcome: CrewOutcome


@attrs.frozen(eq=False)
class _Tick:
    fallback: bool = False
    """Sent by the ``_DEFERRED_TICK`` timer."""


@attrs.frozen(eq=False)
class _Routing:
    """A topic message about to be routed (told before any subscriber can see it)."""

    message: Message


@attrs.frozen(eq=False)
class _CursorsOpen:
    crew_id: CrewId


@attrs.frozen(eq=False)
class _KeptLoaded:
    crew_id: CrewId
    messages: tuple[Message, ...]
    missed: Mapping[str, int]
    upto: int


@attrs.frozen(eq=False)
class _Leftovers:
    crew_id: CrewId
    messages: tuple[Message, ...]


class _Shared:
    """State read on other threads without a hop (publishers, crews): the topic
    patterns of sleeping or snapshotting waits, the crews that are live, their statuses."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.patterns: Counter[str] = Counter()
        self.transient: Counter[str] = Counter()
        """Cursor patterns of crews being snapshotted or activated (their handovers)."""
        self.pattern_view: tuple[str, ...] = ()
        self.handover_view: tuple[str, ...] = ()
        self.in_flight: dict[MessageId, Message] = {}
        """Messages between the start and the end of their routing (publisher threads;
        single dict operations, atomic): a crew deciding to wake adopts the matching ones."""
        self.snapshotting: dict[CrewId, CrewSnapshot] = {}
        self.live: set[CrewId] = set()
        self.status: dict[CrewId, CrewStatus] = {}
        self.kept_read: set[CrewId] = set()
        """Live crews whose wake has read their kept topic events from the store (in the
        writer, in order with the publishes' keeping writes): a publish keeps an event
        for a crew unless it is in here (see ``CrewSupervisor._keep_for_sleepers``)."""
        self.activating: set[CrewId] = set()
        """Crews woken whose restore has not run yet: kept incrementally (added at the
        wake; removed by their first activity after their handover, their finish, their
        release, or, for an actor dead before restoring, the deferred tick's timer)."""
        self.handed: set[CrewId] = set()
        """Activating crews whose topic handover was told (their restore goes on)."""
        self.tick_deferred = False
        """An expiry tick waits for ``activating`` to shrink to ``_RESUME_ACTIVATING``."""
        self.fallback_armed = False
        """The ``_DEFERRED_TICK`` timer is pending (one at most)."""

    def restored(self, crew_id: CrewId) -> bool:
        """``crew_id`` handled its restore, finished or went away; ``True`` if a deferred
        tick may now run (the caller tells the supervisor a ``_Tick``)."""
        with self.lock:
            if crew_id not in self.activating:
                return False
            self.activating.discard(crew_id)
            self.handed.discard(crew_id)
            if self.tick_deferred and len(self.activating) <= _RESUME_ACTIVATING:
                self.tick_deferred = False
                return True
        return False

    def add_patterns(self, patterns: Sequence[str], *, transient: bool = False) -> None:
        with self.lock:
            (self.transient if transient else self.patterns).update(patterns)
            self._views()

    def remove_patterns(self, patterns: Sequence[str], *, transient: bool = False) -> None:
        with self.lock:
            counter = self.transient if transient else self.patterns
            counter.subtract(patterns)
            for p in patterns:
                if counter[p] <= 0:
                    del counter[p]
            self._views()

    def _views(self) -> None:
        self.pattern_view = tuple(dict.fromkeys([*self.patterns, *self.transient]))
        self.handover_view = tuple(self.transient)


def _tell(ref: pykka.ActorRef[Any], message: Any) -> None:
    """Tell the supervisor from a crew or writer thread; after its stop, drop it."""
    try:
        ref.tell(message)
    except pykka.ActorDeadError:
        logger.debug("lifecycle supervisor stopped: {!r} dropped", message)


def _topic_patterns(snapshot: CrewSnapshot) -> list[str]:
    """The topic patterns a sleeping crew is indexed under (once each): those of its
    parked topic waits (a match wakes it) and of its other cursors (a match is kept)."""
    return sorted({topic for topic, _ in snapshot_cursors(snapshot)})


_KEPT_FOR_PARKED_WAITS = """
SELECT DISTINCT e.crew_id FROM cursor_events e WHERE EXISTS (
    SELECT 1 FROM pending_waits w WHERE w.crew_id = e.crew_id AND w.kind = 'OnTopic'
    AND w.topic || char(10) || coalesce(w.metadata_match, '{}') = e.cursor_key)
"""


class _SupervisorActor(pykka.ThreadingActor):
    def __init__(self, sup: CrewSupervisor) -> None:
        super().__init__()
        self.sup = sup
        self.hub = sup.hub
        self.store = sup.store
        self.shared = sup.shared
        self.stats = sup.stats
        self.activator = sup.activator
        self.idle = sup.idle
        self.idle.on_idle(self._idle)
        self.entries: dict[CrewId, _Entry] = {}
        self.outcomes: OrderedDict[CrewId, CrewOutcome] = OrderedDict()
        """The last ``finished_memory`` crews that finished here, oldest first."""
        self.shutting_down = False
        me = self.actor_ref
        self.waits = DurableWaitScheduler(
            self.hub.readers,
            self.hub.clock,
            self.hub.scheduler,
            lambda: _tell(me, _Tick()),
            window=sup.window,
            window_size=sup.window_size,
        )
        sup._actor_obj = self

    # -- dispatch ---------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        try:
            self._dispatch(message)
        except Exception:  # supervision: one bad transition must not stop the supervisor
            logger.opt(exception=True).error("lifecycle supervisor failed handling {!r}", message)
        return None

    def _dispatch(self, message: Any) -> None:
        if isinstance(message, _Call):
            try:
                message.future.set_result(message.fn())
            except Exception as exc:
                message.future.set_exception(exc)
        elif isinstance(message, _Dispatched):
            self._dispatched(message.message)
        elif isinstance(message, _Snapshotted):
            self._snapshotted(message.crew_id, message.snapshot, message.consumed)
        elif isinstance(message, _Refused):
            self._back_to_active(message.crew_id, f"refused: {message.reason}", failed=False)
        elif isinstance(message, _SaveFailed):
            self._back_to_active(message.crew_id, f"snapshot write failed: {message.error}", failed=True)
        elif isinstance(message, _Saved):
            self._saved(message.crew_id)
        elif isinstance(message, _Released):
            self._released(message.crew_id)
        elif isinstance(message, _IdleCheck):
            self.idle.check(message.crew_id)
        elif isinstance(message, _Finished):
            self._finished(message.crew_id, message.status)
        elif isinstance(message, _Gone):
            self._gone(message.crew_id, message.outcome)
        elif isinstance(message, _Tick):
            self._tick(fallback=message.fallback)
        elif isinstance(message, _Routing):
            self._keep_for_handovers(message.message)
        elif isinstance(message, _CursorsOpen):
            self._cursors_open(message.crew_id)
        elif isinstance(message, _KeptLoaded):
            self._kept_loaded(message)
        elif isinstance(message, _Leftovers):
            entry = self.entries.get(message.crew_id)
            if entry is not None:
                entry.carry.extend(message.messages)

    # -- boot -------------------------------------------------------------------------

    def boot(self) -> int:
        """Lazy boot: the topic patterns, a window of expiries, crews with kept mail."""
        rows = self.hub.readers.query(
            "SELECT topic, count(*) FROM (SELECT crew_id, topic FROM pending_waits WHERE kind = 'OnTopic' "
            "UNION SELECT crew_id, topic FROM sleeping_cursors) GROUP BY topic"
        )
        with self.shared.lock:
            for topic, count in rows:
                self.shared.patterns[str(topic)] = int(count)
            self.shared.pattern_view = tuple(self.shared.patterns)
        [(asleep,)] = self.hub.readers.query("SELECT count(DISTINCT crew_id) FROM pending_waits")
        self.stats.booted(int(asleep))
        self.waits.start()
        kept = self.hub.readers.query("SELECT DISTINCT m.mailbox_address FROM mailboxes m")
        crews = {MailboxAddress.parse(str(a)).crew_id for (a,) in kept}
        # Events kept for a parked wait's cursor (published while the supervisor stopped).
        crews.update(CrewId(str(c)) for (c,) in self.hub.readers.query(_KEPT_FOR_PARKED_WAITS))
        for crew in sorted(c for c in crews if c is not None):
            if self.hub.load_snapshot(crew) is not None:
                self._wake(CrewId(crew), None, time.perf_counter(), cause=WakeTrigger.POST)
        return int(asleep)

    # -- spawning ---------------------------------------------------------------------

    def spawn(self, name: str, crew_id: CrewId) -> CrewId:
        if crew_id in self.entries:
            raise InvalidArgumentError(f"crew {crew_id} is already running here")
        if self.hub.load_snapshot(crew_id) is not None:
            raise InvalidArgumentError(f"crew {crew_id} already exists in the store (asleep): wake it instead")
        entry = self._start(name, crew_id)
        start_crew(entry.ref)
        self._activated(crew_id, entry)
        return crew_id

    def _start(self, name: str, crew_id: CrewId) -> _Entry:
        crew = self.activator.build(name, crew_id)
        entry = _Entry(name, crew.ref, crew.idle_timeout, crew.ledger)
        self.entries[crew_id] = entry
        self.outcomes.pop(crew_id, None)  # a finished crew's id used again: that outcome is history
        self.idle.touch(crew_id)
        with self.shared.lock:
            self.shared.live.add(crew_id)
            self.shared.status[crew_id] = CrewStatus.CREATED
        return entry

    def _activated(self, crew_id: CrewId, entry: _Entry) -> None:
        entry.state = LifecycleState.ACTIVE
        self.idle.watch(crew_id, entry.idle_timeout)
        self._enforce_cap()

    # -- sleep ------------------------------------------------------------------------

    def sleep(self, crew_id: CrewId, reason: SleepReason, future: Future[bool] | None) -> None:
        entry = self.entries.get(crew_id)
        if entry is not None and entry.state is LifecycleState.ACTIVATING and not entry.finished:
            entry.deferred_sleeps.append((reason, future))  # asked again once its handover is done
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
        me = self.actor_ref
        shared = self.shared
        ledger = entry.ledger
        taken: list[tuple[CrewSnapshot, tuple[tuple[str, str], ...]]] = []

        def on_snapshot(snapshot: CrewSnapshot) -> None:  # the crew's thread, before its waits go
            taken.append((snapshot, ledger.view()))
            with shared.lock:
                shared.snapshotting[crew_id] = snapshot
            shared.add_patterns(_topic_patterns(snapshot))
            # From now on topic messages for its cursors are kept (see _keep_for_handovers).
            shared.add_patterns(sorted({t for t, _ in snapshot_cursors(snapshot)}), transient=True)

        def on_passivated() -> None:  # the crew's thread: its waits are withdrawn, none had fired
            # So every message in the ledger view was handled: the snapshot reflects it.
            # (A message consumed but still in flight to the crew refuses the sleep, and
            # nothing is saved: its row must stay until a snapshot reflects it.)
            snapshot, consumed = taken[-1]
            _tell(me, _Snapshotted(crew_id, snapshot, consumed))

        entry.ref.tell(
            _Passivate(on_snapshot, lambda why: _tell(me, _Refused(crew_id, why)), on_passivated=on_passivated)
        )

    def _asleep_in_store(self, crew_id: CrewId) -> bool:
        return bool(self.hub.readers.query("SELECT 1 FROM pending_waits WHERE crew_id = ? LIMIT 1", (str(crew_id),)))

    def _snapshotted(self, crew_id: CrewId, snapshot: CrewSnapshot, consumed: tuple[tuple[str, str], ...]) -> None:
        entry = self.entries.get(crew_id)
        if entry is None or entry.state is not LifecycleState.SNAPSHOTTING or entry.stopping:
            return  # stopping: stop() gave up on it, it parks as it is
        me = self.actor_ref
        ledger = entry.ledger

        def on_saved() -> None:  # the writer thread, after the commit
            ledger.acknowledged(consumed)
            _tell(me, _Saved(crew_id))

        self.store.save_async(
            crew_id,
            snapshot,
            list(entry.triggers),
            on_saved=on_saved,
            on_error=lambda exc: _tell(me, _SaveFailed(crew_id, exc)),
            consumed=consumed,
            kept_upto=entry.kept_upto,
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
        with self.shared.lock:
            snapshot = self.shared.snapshotting.pop(crew_id, None)
        if snapshot is not None:
            self.shared.remove_patterns(_topic_patterns(snapshot))
            # Its cursors never closed: they hold every topic message kept meanwhile.
            self.shared.remove_patterns(sorted({t for t, _ in snapshot_cursors(snapshot)}), transient=True)
        entry.state = LifecycleState.ACTIVE
        entry.handover = None
        entry.carry.clear()
        entry.ref.tell(_Resume())
        for message in entry.buffered:
            entry.ref.tell(_Deliver(message))
        entry.buffered.clear()
        for future in entry.sleepers:
            future.set_result(False)
        entry.sleepers.clear()
        self.idle.restart(crew_id)

    def _saved(self, crew_id: CrewId) -> None:
        entry = self.entries.get(crew_id)
        if entry is None or entry.stopping:
            return
        me = self.actor_ref
        entry.ref.tell(
            _Release(
                lambda: _tell(me, _Released(crew_id)),
                on_leftovers=lambda messages: _tell(me, _Leftovers(crew_id, tuple(messages))),
            )
        )

    def _released(self, crew_id: CrewId) -> None:
        entry = self.entries.pop(crew_id, None)
        if entry is None:
            return
        self._not_activating(crew_id)
        self.idle.forget(crew_id)
        with self.shared.lock:
            snapshot = self.shared.snapshotting.pop(crew_id, None)
            self.shared.live.discard(crew_id)
            self.shared.kept_read.discard(crew_id)
            self.shared.status.pop(crew_id, None)
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
            self.shared.remove_patterns(sorted({t for t, _ in snapshot_cursors(snapshot)}), transient=True)
            # Topic messages its cursors got after the snapshot, or that were kept for it
            # while it snapshotted: the snapshot does not hold them, hand them over.
            handover = _Handover(snapshot_cursors(snapshot))
            for message in [*entry.carry, *(entry.handover.messages if entry.handover is not None else [])]:
                handover.keep(crew_id, message)
            held = {m.id for a in snapshot.agents for c in a.cursors for m in c.buffered}
            kept = [m for m in handover.messages if m.id not in held]
        if (entry.buffered or kept) and not self.shutting_down:  # arrived while it snapshotted: wake at once
            first = entry.buffered[0] if entry.buffered else None
            self._wake(crew_id, first, time.perf_counter(), cause=WakeTrigger.BUFFERED, carry=kept)
            woken = self.entries.get(crew_id)
            if woken is not None:
                for message in entry.buffered[1:]:
                    woken.ref.tell(_Deliver(message))
        elif kept and snapshot is not None:  # stopping: keep them for its cursors in the store
            filters = snapshot_cursors(snapshot)
            for message in kept:
                keys = [
                    cursor_events.cursor_key(t, m)
                    for t, m in filters
                    if topic_matches(t, message.topic) and metadata_allows(m, message)
                ]
                self._store_kept(str(crew_id), keys, message)

    # -- wake -------------------------------------------------------------------------

    def _wake(
        self,
        crew_id: CrewId,
        trigger: Message | None,
        started: float,
        *,
        expiry: bool = False,
        cause: str | None = None,
        carry: Sequence[Message] = (),
    ) -> bool:
        """Activate a sleeping crew. A crew without topic cursors is restored and Active
        at once. Otherwise, from here until its restored cursors are open, the
        topic messages matching them are kept (``carry`` first: kept while it slept;
        then the trigger, messages in mid-routing now, and every one heard of until
        then) and handed over in that order (:func:`hand_over`)."""
        entry = self.entries.get(crew_id)
        if entry is not None:
            if entry.state is LifecycleState.SNAPSHOTTING and trigger is not None:
                if trigger.topic in (POST_TOPIC, SEND_TOPIC, REPLY_TOPIC):
                    entry.buffered.append(trigger)
                else:
                    self._keep_for_handovers(trigger)
            return False
        if self.shutting_down:  # posts stay kept and expiries indexed: the next boot wakes it
            logger.debug("crew {}: not woken, the supervisor is stopping", crew_id)
            return False
        snapshot = self.activator.load(crew_id, trigger)
        if snapshot is None:
            return False
        if cause is None:
            cause = WakeTrigger.EXPIRY if expiry else _cause_of(trigger)
        log_transition(crew_id, LifecycleState.ASLEEP, LifecycleState.ACTIVATING, trigger=cause)
        entry = self._start(snapshot.name, crew_id)
        entry.state = LifecycleState.ACTIVATING
        entry.wake_cause = cause
        filters = snapshot_cursors(snapshot)
        if not filters and (trigger is None or trigger.topic in (POST_TOPIC, SEND_TOPIC, REPLY_TOPIC)):
            # No topic cursor to catch up (so nothing kept for it either): no handover,
            # restored and Active at once.
            self.shared.remove_patterns(_topic_patterns(snapshot))
            with self.shared.lock:
                self.shared.activating.add(crew_id)
                self.shared.handed.add(crew_id)  # its first activity report ends its restore
            entry.triggers = self.activator.restore(
                BuiltCrew(crew_id, entry.name, entry.ref, entry.idle_timeout, entry.ledger), snapshot, trigger
            )
            self.stats.woke(cause, time.perf_counter() - started)
            self._activated(crew_id, entry)
            log_transition(crew_id, LifecycleState.ACTIVATING, LifecycleState.ACTIVE, trigger=cause)
            return True
        handover = entry.handover = _Handover(filters)
        self.shared.add_patterns(handover.patterns, transient=True)
        self.shared.remove_patterns(_topic_patterns(snapshot))
        with self.shared.lock:
            self.shared.activating.add(crew_id)
        for message in carry:
            handover.keep(crew_id, message)
        delivered = False
        if trigger is not None and trigger.topic not in (POST_TOPIC, SEND_TOPIC, REPLY_TOPIC):
            delivered = handover.keep(crew_id, trigger) or str(trigger.id) in handover.ids
        for message in list(self.shared.in_flight.values()):  # routed now, maybe before its cursors reopen
            handover.keep(crew_id, message)
        me = self.actor_ref
        entry.triggers = self.activator.restore(
            BuiltCrew(crew_id, entry.name, entry.ref, entry.idle_timeout, entry.ledger),
            snapshot,
            trigger,
            on_cursors_open=lambda: _tell(me, _CursorsOpen(crew_id)),
            handed_over=delivered,
        )
        key = str(crew_id)

        def loaded(result: tuple[list[Message], dict[str, int], int]) -> None:  # the writer, after every earlier write
            messages, missed, upto = result
            _tell(me, _KeptLoaded(crew_id, tuple(messages), missed, upto))

        def not_loaded(exc: BaseException) -> None:
            logger.warning("crew {}: its kept topic events could not be read ({}); handed over later", crew_id, exc)
            _tell(me, _KeptLoaded(crew_id, (), {}, 0))

        shared = self.shared
        shared.kept_read.discard(crew_id)

        def read(conn: apsw.Connection) -> tuple[list[Message], dict[str, int], int]:
            kept = cursor_events.load_kept(conn, key)
            with shared.lock:
                if crew_id in shared.live:  # later keeping writes skip it: its handover has them
                    shared.kept_read.add(crew_id)
            return kept

        self.hub.writer.post(read, after_commit=loaded, on_error=not_loaded)
        self.stats.woke(cause, time.perf_counter() - started)
        return True

    def _keep_for_handovers(self, message: Message) -> None:
        """Keep a topic message for every crew whose cursors are closed (snapshotting or
        activating) and match it."""
        if not self.shared.handover_view:
            return  # no crew is snapshotting or activating
        for crew_id, entry in self.entries.items():
            if entry.state is LifecycleState.ACTIVATING and entry.handover is not None:
                entry.handover.keep(crew_id, message)
            elif entry.state is LifecycleState.SNAPSHOTTING:
                if entry.handover is None:
                    snapshot = self.shared.snapshotting.get(crew_id)
                    if snapshot is None:
                        continue  # not snapshotted yet: its cursors are open
                    entry.handover = _Handover(snapshot_cursors(snapshot))
                entry.handover.keep(crew_id, message)

    def _kept_loaded(self, loaded: _KeptLoaded) -> None:
        """The events kept in the store for the crew (while it slept, and those a publish
        kept before the wake read them): merged into the handover (:meth:`_Handover.merge`)."""
        entry = self.entries.get(loaded.crew_id)
        if entry is None or entry.state is not LifecycleState.ACTIVATING or entry.handover is None:
            return
        entry.kept_loaded = True
        entry.kept_upto = loaded.upto
        entry.kept_missed = dict(loaded.missed)
        entry.handover.merge(loaded.messages)
        if entry.cursors_open:
            self._hand_over(loaded.crew_id, entry)

    def _cursors_open(self, crew_id: CrewId) -> None:
        entry = self.entries.get(crew_id)
        if entry is None or entry.state is not LifecycleState.ACTIVATING or entry.handover is None:
            return
        entry.cursors_open = True
        if entry.kept_loaded:
            self._hand_over(crew_id, entry)

    def _hand_over(self, crew_id: CrewId, entry: _Entry) -> None:
        """The woken crew's cursors are open again and its kept events read: hand over
        everything kept, go Active."""
        handover, entry.handover = entry.handover, None
        assert handover is not None
        self.shared.remove_patterns(handover.patterns, transient=True)
        with self.shared.lock:
            if crew_id in self.shared.activating:
                self.shared.handed.add(crew_id)  # its next activity report ends its restore
        hand_over(entry.ref, handover.messages, entry.kept_missed)
        self._activated(crew_id, entry)
        deferred, entry.deferred_sleeps = entry.deferred_sleeps, []
        for reason, future in deferred:
            self.sleep(crew_id, reason, future)
        log_transition(
            crew_id,
            LifecycleState.ACTIVATING,
            LifecycleState.ACTIVE,
            trigger=entry.wake_cause,
            handed_over=str(len(handover.messages)),
        )

    def _dispatched(self, message: Message) -> None:
        started = time.perf_counter()
        if message.topic in (POST_TOPIC, SEND_TOPIC):
            address = message.target_mailbox
            crew = address.crew_id if address is not None else None
            if crew is not None and crew not in self.entries:
                self._wake(CrewId(crew), message, started)
            return
        if message.topic == REPLY_TOPIC:
            crew = message.target_crew_id
            if crew is not None and crew not in self.entries and self._waits_on_reply(crew, message):
                self._wake(crew, message, started)
            return
        patterns = [p for p in self.shared.pattern_view if topic_matches(p, message.topic)]
        if not patterns:
            return
        self._keep_for_handovers(message)
        marks = ", ".join("?" * len(patterns))
        rows = self.hub.readers.query(
            f"SELECT DISTINCT crew_id, metadata_match FROM pending_waits WHERE kind = 'OnTopic' AND topic IN ({marks})",
            tuple(patterns),
        )
        woken: set[CrewId] = set()
        for crew_text, match in rows:
            crew = CrewId(str(crew_text))
            if crew in woken or crew in self.entries or not scope_allows(crew, message):
                continue
            metadata = None if match is None else FrozenMap(_json_map(str(match)))
            if not metadata_allows(metadata, message):
                continue
            if self._wake(crew, message, started):
                woken.add(crew)

    def _store_kept(self, crew: str, keys: Sequence[str], message: Message) -> None:
        """Queue the write of ``message`` for the crew's sleeping cursors ``keys``."""
        if not keys:
            return
        targets = tuple(keys)
        limit = cursor_events.MAX_KEPT

        def work(conn: apsw.Connection) -> None:
            cursor_events.keep_event(conn, crew, targets, message, limit)

        def failed(exc: BaseException) -> None:
            logger.warning("crew {}: topic event {} not kept for its sleeping cursors: {}", crew, message.id, exc)

        try:
            self.hub.writer.post(work, on_error=failed)
        except HubStoppedError:
            logger.debug("crew {}: topic event {} not kept, the store is closed", crew, message.id)

    def _waits_on_reply(self, crew: CrewId, message: Message) -> bool:
        rows = self.hub.readers.query(
            "SELECT 1 FROM pending_waits WHERE crew_id = ? AND correlation_id = ? LIMIT 1",
            (str(crew), str(message.correlation_id)),
        )
        return bool(rows)

    # -- the durable wait scheduler ---------------------------------------------------

    def _tick(self, *, fallback: bool = False) -> None:
        """Wake the crews whose expiry is due, a batch per tick. Backpressure: at most
        ``_MAX_ACTIVATING`` woken crews may not have restored yet; once there are that
        many, the tick is deferred until at most ``_RESUME_ACTIVATING`` remain (the
        restore reports tell the supervisor) or ``_DEFERRED_TICK`` passed. Without it a
        burst of thousands of expiries starts thousands of crews at once, whose threads
        then contend for the interpreter: measured, that costs far more than the
        activations themselves. ``activating`` is kept incrementally; only the
        ``_DEFERRED_TICK`` timer (one pending at most) looks for woken crews whose actor
        died before restoring, and forgets them."""
        shared = self.shared
        if fallback:
            with shared.lock:
                shared.fallback_armed = False
                gone = [c for c in shared.activating if (e := self.entries.get(c)) is None or not e.ref.is_alive()]
                shared.activating.difference_update(gone)
                shared.handed.difference_update(gone)
            for crew_id in gone:
                self._forget_dead(crew_id)
        with shared.lock:
            busy = len(shared.activating)
            room = _MAX_ACTIVATING - busy
            if room <= 0 or (shared.tick_deferred and busy > _RESUME_ACTIVATING):
                if not shared.fallback_armed:
                    me = self.actor_ref
                    self.hub.scheduler.schedule_at(
                        self.hub.clock.monotonic() + _DEFERRED_TICK, lambda: _tell(me, _Tick(fallback=True))
                    )
                    shared.fallback_armed = True
                shared.tick_deferred = True  # set last: once it is seen, the timer is armed
                return
            shared.tick_deferred = False
        started = time.perf_counter()
        for crew_id in self.waits.due(limit=room):
            if crew_id in self.entries:
                continue
            self.stats.expired()
            try:
                self._wake(crew_id, None, started, expiry=True)
            except Exception:  # one crew that cannot wake must not drop the rest of the batch
                logger.opt(exception=True).error("crew {}: its expiry could not wake it", crew_id)

    def _forget_dead(self, crew_id: CrewId) -> None:
        """A woken crew whose actor stopped before it restored (it never reports back):
        drop it as if the wake had not happened. Activation writes nothing, so it stays
        asleep on its snapshot; its next trigger or the next boot wakes it again."""
        entry = self.entries.get(crew_id)
        if entry is None or entry.finished or entry.ref.is_alive():
            return
        del self.entries[crew_id]
        self.idle.forget(crew_id)
        with self.shared.lock:
            self.shared.live.discard(crew_id)
            self.shared.kept_read.discard(crew_id)
            self.shared.status.pop(crew_id, None)
        if entry.handover is not None:
            self.shared.remove_patterns(entry.handover.patterns, transient=True)
        self.hub.end_deferral(crew_id)
        snapshot = self.store.load(crew_id)
        if snapshot is not None:  # indexed again: a matching topic message wakes it
            self.shared.add_patterns(_topic_patterns(snapshot))
        logger.warning("crew {}: its actor stopped before it restored; it stays asleep on its snapshot", crew_id)

    def _not_activating(self, crew_id: CrewId) -> None:
        """``crew_id`` finished or went away before reporting its restore."""
        if self.shared.restored(crew_id):
            _tell(self.actor_ref, _Tick())

    # -- idle detection and the cap ---------------------------------------------------

    def _idle(self, crew_id: CrewId) -> None:
        """The idle detector's callback: sleep the crew if it waits for a message."""
        entry = self.entries.get(crew_id)
        if entry is None or entry.state is not LifecycleState.ACTIVE or entry.finished:
            return
        if self.shared.status.get(crew_id) is CrewStatus.WAITING:
            self.sleep(crew_id, SleepReason.IDLE, None)
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

    # -- completion -------------------------------------------------------------------

    def _finished(self, crew_id: CrewId, status: CrewStatus) -> None:
        entry = self.entries.get(crew_id)
        if entry is None or entry.finished:
            return
        entry.finished = True
        self._not_activating(crew_id)
        before = entry.state
        if entry.handover is not None and entry.state is LifecycleState.ACTIVATING:
            self.shared.remove_patterns(entry.handover.patterns, transient=True)
            entry.handover = None
        for _, future in entry.deferred_sleeps:
            if future is not None:
                future.set_result(False)
        entry.deferred_sleeps.clear()
        entry.state = LifecycleState.COMPLETED if status is CrewStatus.COMPLETED else LifecycleState.FAILED
        self.idle.forget(crew_id)
        log_transition(crew_id, before, entry.state)
        # Its final state reflects every message it consumed: acknowledge them with the
        # deletion of its snapshot (a crash before that commit wakes it from the
        # snapshot again, those messages redelivered, and it finishes again).
        ledger = entry.ledger
        consumed = ledger.view()
        self.hub.end_deferral(crew_id)  # its waits are withdrawn: it consumes nothing more
        self.store.delete_async(crew_id, consumed, on_deleted=lambda: ledger.acknowledged(consumed))
        # Close its mailboxes and stop its actor now, not at stop(): thousands of
        # finished crews would otherwise each hold their state in memory (and every
        # full garbage collection would walk it). Written after the deletion above (the
        # writer commits in order), so the messages it consumed stay kept until that
        # commit acknowledges them; its outcome stays in ``outcomes``.
        me = self.actor_ref
        try:
            entry.ref.tell(
                _CloseMailboxes(
                    lambda outcome: _tell(me, _Gone(crew_id, outcome)), keep_final=self.sup.finished_memory > 0
                )
            )
        except pykka.ActorDeadError:
            logger.debug("crew {}: stopped before its mailboxes were closed (its stop closed them)", crew_id)
            self._gone(crew_id, CrewOutcome(status))

    def _gone(self, crew_id: CrewId, outcome: CrewOutcome) -> None:
        """Forget a finished crew whose actor stopped; remember its outcome (the last
        ``finished_memory`` ones)."""
        self.outcomes[crew_id] = outcome
        self.outcomes.move_to_end(crew_id)
        while len(self.outcomes) > self.sup.finished_memory:
            self.outcomes.popitem(last=False)
        entry = self.entries.get(crew_id)
        if entry is None or not entry.finished or entry.stopping:
            return
        del self.entries[crew_id]
        with self.shared.lock:
            self.shared.live.discard(crew_id)
            self.shared.kept_read.discard(crew_id)
            self.shared.status.pop(crew_id, None)
        self.idle.forget(crew_id)  # after ``live``: a late activity report is ignored from now on

    # -- queries ----------------------------------------------------------------------

    def state_of(self, crew_id: CrewId) -> LifecycleState:
        entry = self.entries.get(crew_id)
        if entry is not None:
            return entry.state
        outcome = self.outcomes.get(crew_id)
        if outcome is not None:
            return LifecycleState.COMPLETED if outcome.status is CrewStatus.COMPLETED else LifecycleState.FAILED
        record = self.hub.load_snapshot(crew_id)
        if record is None:
            return LifecycleState.UNKNOWN
        return LifecycleState.FAILED if record.state is CrewState.FAILED else LifecycleState.ASLEEP

    def crew_states(self) -> dict[CrewId, LifecycleState]:
        states = {crew_id: entry.state for crew_id, entry in self.entries.items()}
        for crew_id, outcome in self.outcomes.items():
            states.setdefault(
                crew_id,
                LifecycleState.COMPLETED if outcome.status is CrewStatus.COMPLETED else LifecycleState.FAILED,
            )
        return states

    def outcome_of(self, crew_id: CrewId) -> CrewOutcome | None:
        return self.outcomes.get(crew_id)

    def status_of(self, crew_id: CrewId) -> CrewStatus | None:
        if crew_id in self.entries:
            return self.shared.status.get(crew_id)
        outcome = self.outcomes.get(crew_id)
        return None if outcome is None else outcome.status

    def ref_of(self, crew_id: CrewId) -> pykka.ActorRef[CrewActor] | None:
        entry = self.entries.get(crew_id)
        return None if entry is None else entry.ref

    def wake(self, crew_id: CrewId, trigger: Message | None) -> bool:
        return self._wake(
            crew_id, trigger, time.perf_counter(), cause=WakeTrigger.EXPLICIT if trigger is None else None
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
        hub = self.hub
        for crew_id, entry in self.entries.items():
            if entry.stopping:
                continue
            entry.stopping = True
            self.idle.forget(crew_id)
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

            def on_parked(crew: CrewId = crew_id, future: Future[None] = done) -> None:
                hub.end_deferral(crew)
                future.set_result(None)

            try:
                entry.ref.tell(_Release(on_parked))
            except pykka.ActorDeadError:
                on_parked()
            parked.append(done)
        return parked, stopped

    def on_stop(self) -> None:
        self.waits.stop()
        self.idle.stop()
        for entry in self.entries.values():
            if entry.stopping:
                continue  # stop() stopped it already
            try:
                if entry.finished:
                    entry.ref.stop(block=False)
                else:  # the actor was stopped without CrewSupervisor.stop(): park, never unregister
                    entry.ref.tell(_Release(lambda: None))
            except pykka.ActorDeadError:
                continue


def _cause_of(trigger: Message | None) -> str:
    if trigger is None:
        return WakeTrigger.EXPLICIT
    if trigger.topic in (POST_TOPIC, SEND_TOPIC):
        return WakeTrigger.POST
    if trigger.topic == REPLY_TOPIC:
        return WakeTrigger.REPLY
    return WakeTrigger.TOPIC


def _json_map(text: str) -> dict[str, str]:
    import json

    value = json.loads(text)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


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
    Blocking methods (``spawn``, ``sleep``, ``state``, ``outcome``) block the caller's
    thread only: never call them from an actor.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        factories: Mapping[str, CrewFactory] | None = None,
        idle_timeout: float | None = None,
        max_active: int | None = None,
        window: float = 60.0,
        window_size: int = 10_000,
        meter_provider: MeterProvider | None = None,
        finished_memory: int = 10_000,
    ) -> None:
        hub = runtime.hub
        if not isinstance(hub, SqliteEventHub):
            raise InvalidArgumentError("crew sleep and wake need a durable runtime: Runtime.start(store='state.db')")
        self.hub: SqliteEventHub = hub
        self.store = SqliteCrewStateStore(hub)
        self.idle_timeout = idle_timeout
        self.max_active = max_active
        self.window = window
        self.window_size = window_size
        self.factories: dict[str, CrewFactory] = dict(factories or {})
        if isinstance(finished_memory, bool) or not isinstance(finished_memory, int) or finished_memory < 0:
            raise InvalidArgumentError(
                f"finished_memory must be a number of crews (an int >= 0), got {finished_memory!r}"
            )
        self.finished_memory = finished_memory
        if idle_timeout is not None and (isinstance(idle_timeout, bool) or not idle_timeout > 0):
            raise InvalidArgumentError(
                f"idle_timeout must be a positive number of seconds or None, got {idle_timeout!r}"
            )
        self.shared = _Shared()
        self.stats = LifecycleStats(meter_provider)
        self.idle = CrewIdleDetector(hub.clock, hub.scheduler, self._idle_timer)
        self.activator = SnapshotActivator(
            hub, self.store, self.factories, idle_timeout=idle_timeout, on_activity=self._on_activity
        )
        self._actor_obj: _SupervisorActor | None = None
        self._ref = _SupervisorActor.start(self)
        self._stopped = False
        hub.route_listeners.append(self._on_route)
        hub.dispatch_listeners.append(self._on_dispatch)
        self.booted_asleep: int = self._call(self._actor().boot)
        self._runtime_supervisors: list[Any] = runtime.supervisors
        self._runtime_supervisors.append(self)  # what observers (the Studio) enumerate

    @classmethod
    def start(cls, runtime: Runtime, **options: Any) -> CrewSupervisor:
        return cls(runtime, **options)

    def _actor(self) -> _SupervisorActor:
        actor = self._actor_obj  # the actor object; its methods only run inside _call, on its thread
        assert actor is not None
        return actor

    def _call(self, fn: Callable[[], Any], timeout: float | None = 30.0) -> Any:
        future: Future[Any] = Future()
        self._ref.tell(_Call(fn, future))
        return future.result(timeout)

    # -- hooks (other threads) ----------------------------------------------------------

    def _on_route(self, message: Message) -> None:
        """Before ``message`` is routed (publisher thread): note it in flight, and tell
        the actor if a crew whose cursors are closed may want it (see ``_wake``)."""
        shared = self.shared
        shared.in_flight[message.id] = message
        view = shared.handover_view
        if view and any(topic_matches(p, message.topic) for p in view):
            try:
                self._ref.tell(_Routing(message))
            except pykka.ActorDeadError:
                logger.debug("lifecycle supervisor stopped: {} not kept", message.id)

    def _on_dispatch(self, message: Message) -> None:
        """After ``message`` was routed (on the thread that dispatched it: a topic
        message's publisher or the outbox dispatcher, which may wait for the store
        writer; a post or reply may come from the writer's thread and never waits).

        A topic message matching a sleeping crew's cursor is kept durably for it
        (:meth:`_keep_for_sleepers`): the write is queued first, then the actor is told
        (so the read of kept events by a wake it decides is queued after that write),
        then the message leaves ``in_flight`` (a wake decided before this point adopts
        it from there, one decided after hears of it from ``_Dispatched``), and only then
        does the publisher wait for the commit. A failure to keep is logged; the wake
        goes on without the durable copy."""
        shared = self.shared
        topic = message.topic
        kept: Waiter[None] | None = None
        if topic in (POST_TOPIC, SEND_TOPIC, REPLY_TOPIC):
            target = message.target_crew_id
            if target is not None and target in shared.live:
                shared.in_flight.pop(message.id, None)
                return
        else:
            patterns = [p for p in shared.pattern_view if topic_matches(p, topic)]
            if not patterns:
                shared.in_flight.pop(message.id, None)
                return
            try:
                kept = self._keep_for_sleepers(message, patterns)
            except (HubStoppedError, StoreError, apsw.Error) as exc:
                logger.error("topic event {} not kept for its sleeping crews: {}", message.id, exc)
        try:
            self._ref.tell(_Dispatched(message))
        except pykka.ActorDeadError:
            logger.debug("lifecycle supervisor stopped: trigger {} not routed", message.id)
        finally:
            shared.in_flight.pop(message.id, None)
        if kept is None:
            return
        try:
            kept.wait()
        except HubStoppedError:
            logger.debug("topic event {} not kept for sleeping crews: the store is closed", message.id)
        except (StoreError, apsw.Error) as exc:  # published already: the wake goes on, not durably
            logger.error("topic event {} not kept for its sleeping crews: {}", message.id, exc)

    def _keep_for_sleepers(self, message: Message, patterns: Sequence[str]) -> Waiter[None] | None:
        """Queue the durable copy of ``message`` for every crew with a cursor (a parked
        ``wait_for_event`` included) it matches that is asleep, or woken but not yet past
        the read of its kept events, when the write runs; ``None`` if no crew has such a
        cursor. The wake it causes reads it back and hands it over (once: by id); if the
        process dies first, the next boot wakes the crew with it, so a crash loses no
        topic trigger of a sleeping crew. A crew past that read is skipped: its handover
        or its live cursors have the message (``_Dispatched``, ``in_flight``)."""
        if message.topic.startswith("_system."):
            return None
        marks = ", ".join("?" * len(patterns))
        rows = self.hub.readers.query(
            f"SELECT crew_id, cursor_key, metadata_match FROM sleeping_cursors WHERE topic IN ({marks})",
            tuple(patterns),
        )
        shared = self.shared
        keys: dict[CrewId, list[str]] = {}
        for crew_text, key, match in rows:
            crew = CrewId(str(crew_text))
            if crew in shared.kept_read or not scope_allows(crew, message):
                continue
            if metadata_allows(FrozenMap(_json_map(str(match))), message):
                keys.setdefault(crew, []).append(str(key))
        if not keys:
            return None
        limit = cursor_events.MAX_KEPT

        def work(conn: apsw.Connection) -> None:
            for crew, cursor_keys in keys.items():
                if crew not in shared.kept_read:  # decided here, in order with the wakes' reads
                    cursor_events.keep_event(conn, str(crew), cursor_keys, message, limit)

        return self.hub.writer.submit(work)

    def _idle_timer(self, crew_id: CrewId) -> None:
        try:
            self._ref.tell(_IdleCheck(crew_id))
        except pykka.ActorDeadError:
            return

    def _on_activity(self, crew_id: CrewId, status: CrewStatus) -> None:
        shared = self.shared
        if crew_id not in shared.live:
            return  # asleep or finished and forgotten: a late report must not be recorded again
        self.idle.touch(crew_id)
        if crew_id in shared.handed and shared.restored(crew_id):
            try:
                self._ref.tell(_Tick())
            except pykka.ActorDeadError:
                return
        previous = shared.status.get(crew_id)
        shared.status[crew_id] = status
        if status in (CrewStatus.COMPLETED, CrewStatus.FAILED) and previous is not status:
            try:
                self._ref.tell(_Finished(crew_id, status))
            except pykka.ActorDeadError:
                return

    # -- API ----------------------------------------------------------------------------

    def register_factory(self, name: str, factory: CrewFactory) -> None:
        """Register how to build crews named ``name`` (at spawn and at every wake)."""
        self.factories[name] = factory

    def spawn(self, name: str, crew_id: CrewId | str | None = None) -> CrewId:
        """Start a new crew from the factory ``name``; returns its id."""
        crew = CrewId(crew_id) if crew_id is not None else CrewId.new()
        actor = self._actor()
        result: CrewId = self._call(lambda: actor.spawn(name, crew))
        return result

    def sleep(self, crew_id: CrewId | str, reason: SleepReason = SleepReason.EXPLICIT, timeout: float = 30.0) -> bool:
        """Passivate the crew; ``True`` once it is asleep (or already was), ``False`` if
        it was not waiting for a message or its snapshot could not be written."""
        future: Future[bool] = Future()
        actor = self._actor()
        crew = CrewId(crew_id)
        self._call(lambda: actor.sleep(crew, reason, future))
        return future.result(timeout)

    def wake(self, crew_id: CrewId | str, trigger: Message | None = None) -> None:
        """Activate a sleeping crew now (its waits re-armed; ``trigger`` delivered)."""
        actor = self._actor()
        crew = CrewId(crew_id)
        self._call(lambda: actor.wake(crew, trigger))

    def state(self, crew_id: CrewId | str) -> LifecycleState:
        actor = self._actor()
        crew = CrewId(crew_id)
        result: LifecycleState = self._call(lambda: actor.state_of(crew))
        return result

    def crews(self) -> dict[CrewId, LifecycleState]:
        """Every crew this supervisor knows now and its state: the live ones (active,
        snapshotting, activating, and those it put to sleep in this process) and the
        finished ones it still remembers (see :meth:`outcome`). Crews asleep since before
        this process started are in the store, not here."""
        actor = self._actor()
        result: dict[CrewId, LifecycleState] = self._call(actor.crew_states)
        return result

    def ref(self, crew_id: CrewId | str) -> pykka.ActorRef[CrewActor] | None:
        """The live crew actor, or ``None`` while it sleeps and once it finished (its
        actor stops once its outcome is durable: see :meth:`outcome`)."""
        actor = self._actor()
        crew = CrewId(crew_id)
        result: pykka.ActorRef[CrewActor] | None = self._call(lambda: actor.ref_of(crew))
        return result

    def outcome(self, crew_id: CrewId | str) -> CrewOutcome | None:
        """The outcome (status, result, failure) of a crew that finished in this process,
        once its actor stopped; ``None`` before that, for a crew that did not finish here,
        or past the last ``finished_memory`` finished crews (a completed crew is deleted
        from the store at once; a failed one stays there, ``state`` says ``FAILED``)."""
        actor = self._actor()
        crew = CrewId(crew_id)
        result: CrewOutcome | None = self._call(lambda: actor.outcome_of(crew))
        return result

    def status(self, crew_id: CrewId | str) -> CrewStatus | None:
        """The crew's :class:`CrewStatus`: the last one its actor reported while it is
        live (``WAITING`` once every agent is parked, ...), its outcome's once it
        finished (as :meth:`outcome`); ``None`` while it sleeps or is unknown here."""
        actor = self._actor()
        crew = CrewId(crew_id)
        result: CrewStatus | None = self._call(lambda: actor.status_of(crew))
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
        actor = self._actor()
        deadline = time.monotonic() + timeout
        try:
            while timeout > 0:
                futures: list[Future[bool]] = self._call(actor.shutdown_round)
                remaining = deadline - time.monotonic()
                if not futures or remaining <= 0:
                    break
                done, _ = wait_futures(futures, timeout=remaining)
                if all(f.result() for f in done) and len(done) == len(futures):
                    continue  # all asleep: the next round finds none (or crews woken meanwhile)
                if time.monotonic() >= deadline:
                    break
                time.sleep(_SHUTDOWN_RETRY)  # a refusing crew is working: ask again shortly
            parked, stopped = self._call(lambda: actor.stop_rest(asked=timeout > 0))
            _, late = wait_futures(parked, timeout=max(0.0, deadline - time.monotonic()) + _PARK_GRACE)
            if late:  # blocked in a tool or model call: it parks when that returns, if the hub still runs
                logger.warning("{} crew(s) still busy at stop: parked when they return", len(late))
            for future in stopped:
                try:
                    future.get(timeout=_PARK_GRACE)
                except pykka.Timeout:
                    logger.warning("a finished crew did not stop within {} s", _PARK_GRACE)
        finally:
            if self._on_dispatch in self.hub.dispatch_listeners:
                self.hub.dispatch_listeners.remove(self._on_dispatch)
            if self._on_route in self.hub.route_listeners:
                self.hub.route_listeners.remove(self._on_route)
            if self in self._runtime_supervisors:
                self._runtime_supervisors.remove(self)
            self._ref.stop()
