"""A crew going to sleep and waking up (Orkeon EventHub & Crew Lifecycle
specification, §7, §8.1): its side of the conversation with the lifecycle's supervisor.

Plain functions of :class:`~orkeon_actors.crew.crew_actor.CrewActor`'s state, called
only in its turns (on its thread), the actor passed explicitly.

Guarantees:

* a sleep request is refused (``SleepRefused``) unless the crew is waiting for a
  message: every agent idle or parked, nothing queued for the actor, not waking; else
  its snapshot is reported before its live waits are withdrawn, and a wait outcome in
  flight meanwhile refuses the sleep (the waits are re-armed by the ``Resume`` that
  follows);
* a passivated stop parks the mailboxes (their messages stay in the store) and reports
  ``Released`` with what the cursors received after the snapshot, each message once;
* a restore recomposes agents, orchestration and budgets from the snapshot, re-registers
  the mailboxes and, with a supervision, re-arms the waits only after the handover
  (``CatchUp``): every cursor first catches up on what it missed while asleep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from orkeon_actors.crew import finishing, mail_routing, parked_waits
from orkeon_actors.crew.agent_runtime import AgentRuntime
from orkeon_actors.crew.handover import CursorFilter, for_cursor, snapshot_cursors
from orkeon_actors.crew.protocol import (
    Passivate,
    Passivated,
    Released,
    ReleasePurpose,
    SleepRefused,
    SnapshotTaken,
    Supervision,
)
from orkeon_actors.crew.snapshot import CrewSnapshot
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = [
    "EMPTY_SET",
    "cursor_leftovers",
    "handover",
    "park_mailboxes",
    "passivate",
    "restore",
    "restore_state",
]

EMPTY_SET: Final[frozenset[Any]] = frozenset()
"""The empty set every crew starts its bookkeeping sets with: ``frozenset()`` is a new
216-byte object each call (CPython keeps no empty singleton)."""


def restore(actor: CrewActor, snapshot: CrewSnapshot, supervision: Supervision | None = None) -> None:
    """Recompose the crew from ``snapshot`` (its definitions come from the factory
    that built this actor): agent states, orchestration state, budgets used; then
    register the mailboxes (the durable hub reloads what was kept for them, oldest
    first), re-arm every parked agent's wait with its remaining time, and deliver
    the timeout message of a wait that expired meanwhile. With a ``supervision``
    the re-arming waits for the :class:`CatchUp` (see :func:`handover`)."""
    if actor.status is not CrewStatus.CREATED:
        return
    try:
        restore_state(actor, snapshot)
    finally:
        if supervision is not None:
            actor.awaiting_handover = True
            actor.cursors_open_to = supervision
    if not actor.awaiting_handover:
        parked_waits.rearm_all(actor)


def restore_state(actor: CrewActor, snapshot: CrewSnapshot) -> None:
    """Recompose agents, orchestration and budgets from ``snapshot``, register the
    mailboxes, subscribe the bindings and watch the crew's mailbox."""
    if snapshot.id != actor.crew_id:
        raise ValueError(f"snapshot of crew {snapshot.id} cannot restore crew {actor.crew_id}")
    actor.orchestration = snapshot.orchestration
    actor.result = snapshot.result
    actor.durable_cursors = frozenset(snapshot_cursors(snapshot)) or EMPTY_SET
    for state in snapshot.agents:
        runtime = actor.runtimes.get(state.agent_id)
        if runtime is None:
            definition = actor.orchestrator.restore_agent(actor, state)
            actor.definitions[definition.agent_id] = definition
            runtime = AgentRuntime(definition, actor.hub, actor.crew_id)
            actor.runtimes[definition.agent_id] = runtime
        runtime.state = attrs.evolve(state, cursors=())  # the live cursors hold them from now on
        runtime.restore_cursors(state.cursors)
        runtime.budget.consume(tokens=state.budget.tokens_used, cost=state.budget.cost_used)
        runtime.budget.consume(tool_calls=state.budget.tool_calls_used)
    actor.set_status(CrewStatus.RUNNING)
    actor.register_mailboxes()
    for binding in actor.bindings:
        mail_routing.subscribe(actor, binding)
    mail_routing.arm_crew_pump(actor)
    actor.trace(None, "crew", f"woke mode={actor.orchestrator.mode} agents={','.join(actor.runtimes)}")


def handover(actor: CrewActor, messages: Sequence[Message], missed: Mapping[CursorFilter, int]) -> None:
    """The lifecycle's handover: every cursor catches up on the ``messages`` it
    matches and did not receive (published before it reopened; see
    :meth:`TopicCursors.catch_up`), then the waits are re-armed (a parked
    ``wait_for_event`` resolves with its cursor's oldest event) and the actor
    messages held meanwhile are handled, in order. ``missed``: what the store
    dropped per cursor while the crew slept (reported by the cursor's next read)."""
    for runtime in actor.runtimes.values():
        for cursor in runtime.open_cursors():
            topic, match = cursor.key
            cursor.carried_missed += missed.get((topic, match or None), 0)
            matching = for_cursor(cursor.key, actor.crew_id, messages)
            if matching:
                runtime.tools.topic_cursors.catch_up(cursor, matching)
    parked_waits.rearm_all(actor)


def passivate(actor: CrewActor, message: Passivate) -> None:
    """Sleep request. Refused (:class:`SleepRefused`) unless the crew is waiting
    for a message: every agent idle or parked, nothing queued for this actor. Else
    :class:`SnapshotTaken` is reported *before* the live waits are withdrawn (its
    cursors stay open until the release, so a topic message published meanwhile is
    in them or kept by the supervisor), then :class:`Passivated`; if a wait's
    outcome is already in flight, the sleep is refused (:class:`SleepRefused`) and
    the waits are re-armed by the :class:`Resume` that follows."""
    supervision = message.supervision
    busy = any(rt.busy for rt in actor.runtimes.values())
    if actor.awaiting_handover:
        supervision.tell(SleepRefused(actor.crew_id, "crew is still waking (its cursors are catching up)"))
        return
    if actor.status is not CrewStatus.WAITING or busy or actor.deferred or not actor.actor_inbox.empty():
        reason = f"crew is {actor.status.value}" + (" with work queued" if not busy else "")
        supervision.tell(SleepRefused(actor.crew_id, reason))
        return
    snapshot = actor.snapshot()
    actor.snapshot_held = (
        frozenset(m.id for state in snapshot.agents for c in state.cursors for m in c.buffered) or EMPTY_SET
    )
    consumed = message.consumed.view() if message.consumed is not None else ()
    taken = [i for rt in actor.runtimes.values() for c in rt.open_cursors() for i in c.taken_ids()]
    reflected = tuple(dict.fromkeys([*taken, *(str(i) for i in actor.snapshot_held)]))
    supervision.tell(SnapshotTaken(actor.crew_id, snapshot, consumed, reflected))
    in_flight = False
    for runtime in actor.runtimes.values():
        in_flight = runtime.withdraw() or in_flight
    if actor.crew_pump is not None:
        if not actor.crew_pump.cancel():
            in_flight = True
        actor.crew_pump = None
    if in_flight or not actor.actor_inbox.empty():
        supervision.tell(SleepRefused(actor.crew_id, "a message reached the crew while it was being snapshotted"))
    else:
        supervision.tell(Passivated(actor.crew_id))


def cursor_leftovers(actor: CrewActor) -> list[Message]:
    """What the cursors received after the sleep snapshot was taken (not in it),
    each message once, cursor by cursor in arrival order."""
    seen: set[object] = set(actor.snapshot_held)
    out: list[Message] = []
    for runtime in actor.runtimes.values():
        runtime.unread(seen, out)
    return out


def park_mailboxes(actor: CrewActor) -> None:
    """Passivated stop: release waits and subscriptions; the mailboxes stay durably
    registered (their messages are kept in the store until the crew wakes)."""
    order = actor.release_order
    sleeping = order is not None and order.purpose is ReleasePurpose.SLEEP
    leftovers = tuple(cursor_leftovers(actor)) if sleeping else ()
    finishing.release_waits(actor)
    registrations = [rt.registration for rt in actor.runtimes.values()]
    registrations.append(actor.crew_registration)
    actor.hub.park_mailboxes([registration for registration in registrations if registration is not None])
    for runtime in actor.runtimes.values():
        runtime.registration = None
    actor.crew_registration = None
    actor.unname()
    if order is not None and order.supervision is not None:
        order.supervision.tell(Released(actor.crew_id, order.purpose, leftovers))
