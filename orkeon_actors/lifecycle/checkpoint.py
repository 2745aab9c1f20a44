"""Checkpoints: a live crew's new cursors made durable (Orkeon EventHub & Crew Lifecycle
specification, §5.2, §7, §11).

A supervised crew's cursor events are kept durably (``cursor_events``) only for the
cursors its last committed snapshot holds: a crash restores the crew from that snapshot,
so a cursor it does not hold has nothing to hand its events to. A crew that never slept
has no snapshot at all. So when an agent parks on a cursor its crew's last snapshot does
not hold (``CrewActor(on_cursor=...)``), the crew gets a :class:`CheckpointGate` and, as
soon as it waits for a message, a **checkpoint**: the sleep's snapshot transaction
(snapshot, pending waits, cursor index, acknowledgements) without the sleep, after which
its cursors are live and durable (``SharedState.go_live``) and its waits re-armed.
The same checkpoint is taken before an agent's hub side effects run
(``CrewActor(on_checkpoint=...)``, :func:`orkeon_actors.crew.replay_keys.hold`): the
agent holds the ``post_message``/``send_request`` calls its model answered, its crew
counts as waiting, a gate without cursors opens (``SharedState.checkpoint_new``) and the
``Resume`` after the commit (or after a refusal or failure) runs them.
The supervisor's side, in its turns: :func:`take_checkpoint` (the crew is told to
snapshot, as for a sleep), :func:`checkpointed` (committed: it stays Active) and
:func:`sleep_after_checkpoint` (the sleeps asked for meanwhile); the snapshot's save,
refusal and failure are the sleep's (:mod:`~orkeon_actors.lifecycle.sleep_transitions`).

From the moment the gate exists (the agent parked on the cursor) until the checkpoint
commits, a topic message matching the gate's cursors is routed as usual, but its
publisher waits for the commit (:func:`note_waiting`, :func:`settle_waiting`): then the
message is either reflected by the checkpoint's snapshot (its cursor holds it or handed
it out), or kept in ``cursor_events`` for the crew before ``publish`` returns. A SIGKILL
at any point after the agent parked therefore loses none of the events whose ``publish``
returned: before the commit none has returned (the crew is restored from before it
opened the cursor, or, never slept, is gone with its cursor); after it the snapshot or
the kept rows hold each one, and the restored crew's handover reads each once (by id).

A publish never waits on the store writer's thread (every commit waits for it; an
``after_commit`` callback that publishes), nor for the checkpoint of the crew that
published it (``message.source_crew_id``: its own turn would wait for itself); those
events are in the crew's cursor, durable once a snapshot reflects them. Any other
publisher waits at most :data:`CHECKPOINT_WAIT` seconds (two crews waiting for each
other's checkpoint); past it the event is logged and stays in memory.
A checkpoint refused because a message reached the crew meanwhile is taken again at
its next wait; one whose save failed (a store error, logged) is taken again at once,
up to :data:`CHECKPOINT_ATTEMPTS` saves: meanwhile the gate stays open, its publishers
go on waiting (within :data:`CHECKPOINT_WAIT`) and ``CrewSupervisor.durable`` is
``False``. A checkpoint that ends without a commit (the crew stopped or finished, or
its last attempt failed) releases its waiting publishers without keeping: their events
are in the cursor's memory only, until the crew's next snapshot reflects them.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING

from loguru import logger

from orkeon_actors.crew.handover import CursorFilter, matching_filters
from orkeon_actors.crew.protocol import Passivate
from orkeon_actors.errors import HubStoppedError, StoreError
from orkeon_actors.lifecycle.ports import LifecycleState, SleepReason, WakeIndex
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.lifecycle.supervisor_actor import SupervisorActor
    from orkeon_actors.lifecycle.supervisor_state import CrewEntry

__all__ = [
    "CHECKPOINT_ATTEMPTS",
    "CHECKPOINT_WAIT",
    "CheckpointGate",
    "WaitingPublish",
    "checkpointed",
    "note_waiting",
    "settle_waiting",
    "sleep_after_checkpoint",
    "take_checkpoint",
]

CHECKPOINT_WAIT = 10.0
"""Seconds a publisher waits for the checkpoint of a crew whose new cursor its message
matches (see the module docstring)."""


CHECKPOINT_ATTEMPTS = 3
"""Checkpoint saves tried before a crew's new cursors are left in memory only (each
retried at once: the crew resumes its waits and is asked again)."""


class CheckpointGate:
    """One crew's cursors not yet held by a committed snapshot, and the checkpoint its
    publishers wait for: ``done`` is set to the ids that checkpoint's snapshot reflects
    once it committed, ``None`` if it ended without one."""

    __slots__ = ("asked", "done", "failures", "filters")

    def __init__(self) -> None:
        self.filters: list[CursorFilter] = []
        self.done: Future[frozenset[str] | None] = Future()
        self.asked = False
        """A checkpoint was asked for (the supervisor is told once per attempt)."""
        self.failures = 0
        """Checkpoints that could not be written (at :data:`CHECKPOINT_ATTEMPTS`, it ends)."""

    def settle(self, reflected: frozenset[str] | None) -> None:
        """Release the waiting publishers (idempotent)."""
        if not self.done.done():
            self.done.set_result(reflected)


WaitingPublish = tuple[CrewId, list[CursorFilter], CheckpointGate]
"""A publish waiting for a crew's checkpoint: the crew, its new cursors the message
matches, the gate."""


def note_waiting(gates: dict[CrewId, CheckpointGate], message: Message) -> list[WaitingPublish]:
    """Before ``message`` is routed: the gates whose cursors it matches (not for the
    crew that published it)."""
    waiting: list[WaitingPublish] = []
    for crew, gate in list(gates.items()):
        if message.source_crew_id == crew:
            continue
        filters = matching_filters(list(gate.filters), crew, message)
        if filters:
            waiting.append((crew, filters, gate))
    return waiting


def settle_waiting(wakes: WakeIndex, message: Message, waiting: Sequence[WaitingPublish]) -> None:
    """After ``message`` was routed (its publisher's thread): wait for each crew's
    checkpoint; keep the message durably for the crew's cursors unless the checkpoint's
    snapshot reflects it (or there was no checkpoint); return once kept."""
    for crew, filters, gate in waiting:
        try:
            reflected = gate.done.result(CHECKPOINT_WAIT)
        except FutureTimeout:
            logger.warning(
                "topic event {} not kept for crew {}: its checkpoint did not commit within {} s",
                message.id,
                crew,
                CHECKPOINT_WAIT,
            )
            continue
        if reflected is None or str(message.id) in reflected:
            continue
        keys = [wakes.cursor_key(f) for f in filters]
        try:
            wakes.keep_for_sleepers({crew: keys}, message, lambda _crew: False).wait()
        except HubStoppedError:
            logger.debug("topic event {} not kept for crew {}: the store is closed", message.id, crew)
        except StoreError as exc:
            logger.error("topic event {} not kept for crew {}'s new cursor: {}", message.id, crew, exc)


# -- the supervisor's checkpoint transitions (its turns) ------------------------------------------------------


def take_checkpoint(actor: SupervisorActor, crew_id: CrewId) -> None:
    """A crew with a cursor its last snapshot does not hold waits for a message:
    take the sleep's snapshot transaction without the sleep. Not now (it is waking,
    sleeping or finished): the next wait asks again, or its sleep settles the gate."""
    entry = actor.entries.get(crew_id)
    if entry is None or entry.finished or entry.stopping or entry.state is not LifecycleState.ACTIVE:
        actor.shared.end_checkpoint(crew_id, None, retry=entry is not None and not entry.finished)
        return
    entry.state = LifecycleState.SNAPSHOTTING
    entry.checkpoint = True  # its idle count goes on: an idle sleep meanwhile is made after it
    entry.snapshot = entry.taken = None
    entry.ref.tell(Passivate(actor.inbox, entry.ledger))


def checkpointed(actor: SupervisorActor, crew_id: CrewId, entry: CrewEntry) -> None:
    """The checkpoint committed (its cursors went live and durable on the writer's
    thread, its publishers released): re-arm its waits, stay Active."""
    entry.checkpoint = False
    entry.state = LifecycleState.ACTIVE
    entry.snapshot = entry.taken = None
    entry.handover = None
    entry.triggers = []  # recorded processed by that transaction
    entry.kept_upto = 0  # deleted by it
    entry.resume()
    logger.debug("crew {}: checkpoint committed, its cursors are durable", crew_id)
    sleep_after_checkpoint(actor, crew_id, entry)


def sleep_after_checkpoint(actor: SupervisorActor, crew_id: CrewId, entry: CrewEntry) -> None:
    """Make the sleeps asked for while it checkpointed (``stop()``'s included)."""
    asked = [(SleepReason.SHUTDOWN, f) for f in entry.sleepers]
    entry.sleepers.clear()
    deferred, entry.deferred_sleeps = [*entry.deferred_sleeps, *asked], []
    for reason, future in deferred:
        actor.sleep(crew_id, reason, future)
