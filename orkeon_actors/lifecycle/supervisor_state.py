"""The lifecycle supervisor's state and messages (Orkeon EventHub & Crew Lifecycle
specification, §7): one :class:`CrewEntry` per live crew, touched only in the
supervisor actor's turns; :class:`SharedState`, the one part read on other threads
(publishers, crews, the store writer), under its lock; the messages the supervisor
tells itself; and :class:`SupervisorInbox`, where crews tell their reports.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import attrs
import pykka
from loguru import logger

from orkeon_actors.crew.crew_actor import CrewActor
from orkeon_actors.crew.handover import CursorFilter, Handover, snapshot_cursors
from orkeon_actors.crew.protocol import (
    CrewReport,
    Deliver,
    End,
    Resume,
    SnapshotTaken,
)
from orkeon_actors.crew.snapshot import CrewSnapshot
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.hub.port import DeferredAcks
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.lifecycle.checkpoint import CHECKPOINT_ATTEMPTS, CheckpointGate, WaitingPublish
from orkeon_actors.lifecycle.ports import KeptEvents, LifecycleState, SleepReason
from orkeon_actors.model.ids import CrewId, MessageId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor_actor import SupervisorActor

__all__ = [
    "DEFERRED_TICK",
    "BurstCheck",
    "MAX_ACTIVATING",
    "RESUME_ACTIVATING",
    "Call",
    "CheckpointDue",
    "CrewEntry",
    "Dispatched",
    "Finished",
    "IdleCheck",
    "KeptLoaded",
    "Routing",
    "SaveFailed",
    "Saved",
    "SharedState",
    "SupervisorInbox",
    "Tick",
    "durable_patterns",
    "tell_supervisor",
    "topic_patterns",
]

MAX_ACTIVATING = 64
"""Expiries are handed over only while fewer woken crews than this have not yet
restored (see :func:`~orkeon_actors.lifecycle.expiry_wakes.expiry_tick`)."""
RESUME_ACTIVATING = 48
"""A deferred expiry tick runs again once at most this many woken crews have not
restored: a batch of at least ``MAX_ACTIVATING - RESUME_ACTIVATING`` per tick, not
one tick per restored crew."""
DEFERRED_TICK = 0.05
"""Seconds after which a deferred expiry tick is tried again even if no restored crew
reported back (a crew actor that died before restoring never does): one such timer
pending at most, which also forgets the activating crews whose actor is dead."""


class CrewEntry:
    __slots__ = (
        "buffered",
        "carry",
        "checkpoint",
        "cursors_open",
        "deferred_sleeps",
        "ending",
        "finished",
        "handover",
        "idle_timeout",
        "kept_loaded",
        "kept_missed",
        "kept_upto",
        "ledger",
        "name",
        "parked",
        "reason",
        "ref",
        "releasing",
        "sleepers",
        "snapshot",
        "state",
        "stopping",
        "taken",
        "triggers",
        "volatile",
        "wake_cause",
    )

    def __init__(
        self,
        name: str,
        ref: pykka.ActorRef[CrewActor],
        idle_timeout: float | None,
        ledger: DeferredAcks,
        volatile: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.name = name
        self.volatile: Mapping[str, frozenset[str]] = volatile or {}
        """Per agent id: the cursor topic patterns it opted out of durability."""
        self.ref = ref
        self.ledger = ledger
        """The mailbox messages the crew consumed that no snapshot reflects yet."""
        self.stopping = False
        """Stopped by ``CrewSupervisor.stop()`` (parked if unfinished)."""
        self.state = LifecycleState.ACTIVE
        self.idle_timeout = idle_timeout
        self.buffered: list[Message] = []
        """Non-topic triggers (posts, replies) that arrived while it snapshotted."""
        self.handover: Handover | None = None
        """Topic messages kept while its cursors are closed (snapshotting, activating)."""
        self.carry: list[Message] = []
        """What its cursors received after its sleep snapshot (told at release)."""
        self.checkpoint = False
        """Snapshotting for a checkpoint (:mod:`~orkeon_actors.lifecycle.checkpoint`), not a sleep."""
        self.snapshot: CrewSnapshot | None = None
        """Its sleep snapshot, from :class:`SnapshotTaken` until it sleeps or stays active."""
        self.taken: SnapshotTaken | None = None
        """The report of that snapshot (saved once the crew reports :class:`Passivated`)."""
        self.parked: Future[None] | None = None
        """Set by ``stop_rest``: resolved once the crew reports it parked at stop."""
        self.cursors_open = False
        self.ending: End | None = None
        """Set by ``CrewSupervisor.end``: the :class:`End` told (or to tell once it slept)."""
        self.releasing = False
        """:class:`Release` told for its sleep: its actor stops, its ``Released`` follows."""
        self.deferred_sleeps: list[tuple[SleepReason, Future[bool] | None]] = []
        """Sleep requests made while it was activating: made once it is active."""
        self.kept_loaded = False
        self.kept_missed: Mapping[tuple[str, Any], int] = {}
        self.kept_upto = 0
        """The last ``cursor_events`` row handed over at its wake: deleted by its next snapshot."""
        self.triggers: list[str] = []
        self.sleepers: list[Future[bool]] = []
        self.finished = False
        self.reason = SleepReason.EXPLICIT
        self.wake_cause = ""
        """What woke it (a ``WakeTrigger``), logged when it goes Active."""

    def resume(self) -> None:
        """Tell the crew, which stays Active, to re-arm its waits, then deliver the
        triggers that arrived while it snapshotted (in their order)."""
        self.ref.tell(Resume())
        for message in self.buffered:
            self.ref.tell(Deliver(message))
        self.buffered.clear()

    def refuse_deferred_sleeps(self) -> None:
        """Answer ``False`` to the sleeps asked for while it was waking or checkpointing
        (it finished, or the supervisor stops it)."""
        for _, future in self.deferred_sleeps:
            if future is not None:
                future.set_result(False)
        self.deferred_sleeps.clear()


# -- the messages the supervisor tells itself -------------------------------------------------------------------


@attrs.frozen(eq=False)
class Call:
    """Run ``fn`` with the supervisor actor, in its turn (the blocking API's calls)."""

    fn: Callable[[SupervisorActor], Any]
    future: Future[Any]


@attrs.frozen(eq=False)
class Dispatched:
    message: Message


@attrs.frozen(eq=False)
class Saved:
    crew_id: CrewId


@attrs.frozen(eq=False)
class SaveFailed:
    crew_id: CrewId
    error: BaseException


@attrs.frozen(eq=False)
class IdleCheck:
    crew_id: CrewId


@attrs.frozen(eq=False)
class Finished:
    crew_id: CrewId
    status: CrewStatus


@attrs.frozen(eq=False)
class CheckpointDue:
    """A crew with a cursor its last snapshot does not hold waits for a message."""

    crew_id: CrewId


@attrs.frozen(eq=False)
class Tick:
    fallback: bool = False
    """Sent by the ``DEFERRED_TICK`` timer."""


@attrs.frozen(eq=False)
class BurstCheck:
    """The quiet timer of a burst of expiries (:mod:`orkeon_actors.lifecycle.burst_gc`)."""


@attrs.frozen(eq=False)
class Routing:
    """A topic message about to be routed (told before any subscriber can see it)."""

    message: Message


@attrs.frozen(eq=False)
class KeptLoaded:
    crew_id: CrewId
    kept: KeptEvents


class SharedState:
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
        self.reflected_in_flight: dict[MessageId, set[CrewId]] = {}
        """Messages still in mid-routing that a crew's committed snapshot already
        reflects (its cursor was handed it while its publisher had not kept it yet): their
        publisher must not keep them for that crew afterwards (set after each save's
        commit; gone with the message from ``in_flight``; the keeping write holds its own
        reference to the set)."""
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
        """An expiry tick waits for ``activating`` to shrink to ``RESUME_ACTIVATING``."""
        self.fallback_armed = False
        """The ``DEFERRED_TICK`` timer is pending (one at most)."""
        self.durable_live: dict[CrewId, frozenset[str]] = {}
        """Live crews restored from a snapshot: the topic patterns of that snapshot's
        cursors whose events are kept durably while the crew is live (not opted out)."""
        self.live_patterns: Counter[str] = Counter()
        self.live_view: tuple[str, ...] = ()
        """The patterns of ``durable_live``, once each: a publish matching one of them
        is kept for those crews before it is routed (``CrewSupervisor.on_route``)."""
        self.live_kept: dict[MessageId, tuple[Waiter[None], frozenset[CrewId]]] = {}
        """The keeping writes queued by ``on_route`` (and the crews kept for), waited
        for by ``on_dispatch``."""
        self.checkpoint_due: dict[CrewId, CheckpointGate] = {}
        """Live crews with a cursor no committed snapshot holds (told by the crew when
        an agent parks on it): their publishers wait for the checkpoint."""
        self.checkpoint_waits: dict[MessageId, list[WaitingPublish]] = {}
        """Publishes routed while a gate they match is open, settled by ``on_dispatch``."""
        self.stop_watch: threading.Event | None = None
        """While ``CrewSupervisor.stop()`` runs: set by every activity report of a crew
        that is not running (waiting, finished), so the crews that refused to sleep
        because they were working are asked again once one stopped working, not on a poll."""

    def done_routing(self, message_id: MessageId) -> None:
        """``message_id`` is no longer in mid-routing (single dict operations, atomic)."""
        self.in_flight.pop(message_id, None)
        self.reflected_in_flight.pop(message_id, None)

    def forget_crew(self, crew_id: CrewId) -> None:
        """``crew_id`` has no actor here any more (asleep, gone, or dead before it
        restored): out of ``live``, ``kept_read`` and ``status`` at once, under the lock."""
        with self.lock:
            self.live.discard(crew_id)
            self.kept_read.discard(crew_id)
            self.status.pop(crew_id, None)

    def saved_reflecting(self, crew_id: CrewId, reflected: frozenset[str]) -> None:
        """After the commit of a snapshot of ``crew_id`` reflecting ``reflected`` (the
        writer's thread): note those still in mid-routing (see ``reflected_in_flight``)."""
        for message_id in list(self.in_flight):
            if str(message_id) in reflected and message_id in self.in_flight:
                self.reflected_in_flight.setdefault(message_id, set()).add(crew_id)

    def restored(self, crew_id: CrewId) -> bool:
        """``crew_id`` handled its restore, finished or went away; ``True`` if a deferred
        tick may now run (the caller tells the supervisor a ``Tick``)."""
        with self.lock:
            if crew_id not in self.activating:
                return False
            self.activating.discard(crew_id)
            self.handed.discard(crew_id)
            if self.tick_deferred and len(self.activating) <= RESUME_ACTIVATING:
                self.tick_deferred = False
                return True
        return False

    def cursor_opened(self, crew_id: CrewId, cursor: CursorFilter) -> None:
        """An agent of ``crew_id`` parked on ``cursor``, which no committed snapshot of
        the crew holds (the crew's thread): open its gate, or add it to the open one."""
        with self.lock:
            gate = self.checkpoint_due.get(crew_id)
            if gate is None:
                gate = self.checkpoint_due[crew_id] = CheckpointGate()
            gate.filters.append(cursor)

    def checkpoint_new(self, crew_id: CrewId) -> None:
        """``crew_id`` is about to be spawned with a checkpoint at its first wait: a gate
        with no cursor (no publisher waits for it)."""
        with self.lock:
            self.checkpoint_due.setdefault(crew_id, CheckpointGate())

    def checkpoint_asked(self, crew_id: CrewId) -> bool:
        """Whether a checkpoint of ``crew_id`` is due and not asked for yet (then it is
        marked asked: the caller tells the supervisor)."""
        with self.lock:
            gate = self.checkpoint_due.get(crew_id)
            if gate is None:
                return False
            if gate.asked:
                return False
            gate.asked = True
            return True

    def end_checkpoint(
        self, crew_id: CrewId, reflected: frozenset[str] | None, *, retry: bool = False, failed: bool = False
    ) -> None:
        """A checkpoint (or a sleep) of ``crew_id`` ended: committed with ``reflected``
        (the ids its snapshot reflects), or ``None``. With ``retry`` (refused: a message
        reached the crew) the gate stays open and is asked for again at its next wait;
        with ``failed`` (its save failed) too, until :data:`CHECKPOINT_ATTEMPTS` saves
        failed: then it ends without a snapshot."""
        with self.lock:
            gate = self.checkpoint_due.get(crew_id)
            if gate is None:
                return
            if failed:
                gate.failures += 1
                retry = gate.failures < CHECKPOINT_ATTEMPTS
            if retry:
                gate.asked = False
                return
            del self.checkpoint_due[crew_id]
        gate.settle(reflected)

    def go_live(self, crew_id: CrewId, patterns: Sequence[str]) -> None:
        """``crew_id`` is live with durable cursors on ``patterns`` (replacing any)."""
        self.leave_live(crew_id)
        if not patterns:
            return
        with self.lock:
            self.durable_live[crew_id] = frozenset(patterns)
            self.live_patterns.update(set(patterns))
            self.live_view = tuple(self.live_patterns)

    def leave_live(self, crew_id: CrewId) -> None:
        """``crew_id`` is no longer live (asleep, finished, gone): idempotent."""
        with self.lock:
            patterns = self.durable_live.pop(crew_id, None)
            if patterns is None:
                return
            self.live_patterns.subtract(patterns)
            for p in patterns:
                if self.live_patterns[p] <= 0:
                    del self.live_patterns[p]
            self.live_view = tuple(self.live_patterns)

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


def tell_supervisor(ref: pykka.ActorRef[Any], message: Any) -> None:
    """Tell the supervisor from a crew or writer thread; after its stop, drop it."""
    try:
        ref.tell(message)
    except pykka.ActorDeadError:
        logger.debug("lifecycle supervisor stopped: {!r} dropped", message)


class SupervisorInbox:
    """The supervisor's :class:`~orkeon_actors.crew.protocol.Supervision`: crews tell
    their reports here (from their threads); they are handled in the supervisor's turns."""

    __slots__ = ("ref",)

    def __init__(self, ref: pykka.ActorRef[Any]) -> None:
        self.ref = ref

    def tell(self, report: CrewReport) -> None:
        tell_supervisor(self.ref, report)


def topic_patterns(snapshot: CrewSnapshot) -> list[str]:
    """The topic patterns a sleeping crew is indexed under (once each): those of its
    parked topic waits (a match wakes it) and of its other cursors (a match is kept)."""
    return sorted({topic for topic, _ in snapshot_cursors(snapshot)})


def durable_patterns(snapshot: CrewSnapshot, volatile: Mapping[str, frozenset[str]]) -> list[str]:
    """The topic patterns of ``snapshot`` whose events are kept durably while the crew
    is live: all of :func:`topic_patterns` but those on which every agent holding a
    cursor opted out (``volatile``: per agent id, ``Agent.volatile_cursors``)."""
    patterns = topic_patterns(snapshot)
    if not volatile:
        return patterns
    holders: dict[str, list[bool]] = {}
    for agent in snapshot.agents:
        opted = volatile.get(str(agent.agent_id), frozenset())
        for cursor in agent.cursors:
            holders.setdefault(cursor.topic, []).append(cursor.topic in opted)
    return [p for p in patterns if not (p in holders and all(holders[p]))]
