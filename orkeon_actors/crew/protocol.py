"""The crew-supervisor protocol: the typed messages a crew and its lifecycle owner
exchange (Orkeon EventHub & Crew Lifecycle specification, §7, §8).

Both sides only *tell*: a command goes to the crew actor's inbox and is handled in one
of the crew's turns; the crew answers with a :data:`CrewReport` told to the
:class:`Supervision` given with the command, handled in one of the supervisor's turns.
Neither side ever runs code of the other on its own thread, so each one's state is
touched only by its own actor.

Commands (to a crew):

* :class:`Restore` — recompose from a snapshot instead of starting (a wake); with a
  ``supervision`` the crew reports :class:`CursorsOpen` and then holds everything told to
  it until the :class:`CatchUp`;
* :class:`CatchUp` — the topic messages its cursors missed while they were closed (a
  :class:`~orkeon_actors.crew.handover.Handover`'s);
* :class:`Deliver` — a trigger (a topic message or reply) for a parked agent;
* :class:`Passivate` — a sleep request, answered by :class:`SnapshotTaken` followed by
  :class:`Passivated` or :class:`SleepRefused` (or by :class:`SleepRefused` alone);
* :class:`Resume` — the sleep failed: re-arm every withdrawn wait;
* :class:`Release` — the snapshot is durable (or the runtime stops): park the mailboxes
  and stop; answered by :class:`Released`;
* :class:`CloseMailboxes` — the crew finished and its outcome is durable: close its
  mailboxes and stop; answered by :class:`Closed` once the actor stopped.
* :class:`End` — end the crew from outside (``rt.fleet.stop``): it fails with the given
  cause, and its supervisor finishes it like any other failed crew.

Every report names its crew, so one :class:`Supervision` serves every crew.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Protocol

import attrs

from orkeon_actors.crew.handover import CursorFilter
from orkeon_actors.crew.snapshot import CrewOutcome, CrewSnapshot
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

__all__ = [
    "CatchUp",
    "CloseMailboxes",
    "Closed",
    "ConsumedView",
    "CrewReport",
    "CursorsOpen",
    "Deliver",
    "End",
    "Passivate",
    "Passivated",
    "Release",
    "ReleasePurpose",
    "Released",
    "Restore",
    "Resume",
    "SleepRefused",
    "SnapshotTaken",
    "Supervision",
]


# -- reports (crew -> supervisor) ---------------------------------------------------------


@attrs.frozen(eq=False)
class SnapshotTaken:
    """The crew took its sleep snapshot (before withdrawing its live waits)."""

    crew_id: CrewId
    snapshot: CrewSnapshot
    consumed: tuple[tuple[str, str], ...]
    """The consumed ``(mailbox address, message id)`` rows the snapshot reflects, read
    from the :class:`ConsumedView` given with :class:`Passivate` at the snapshot's moment."""
    reflected_events: tuple[str, ...] = ()
    """Ids of the topic messages the snapshot reflects: those its cursors handed out
    (since they opened) or hold. Their durable copies (kept for the crew's cursors while
    it was live) are deleted with the snapshot."""


@attrs.frozen(eq=False)
class Passivated:
    """The live waits are withdrawn and none had fired: the snapshot last reported
    reflects every message the crew consumed."""

    crew_id: CrewId


@attrs.frozen(eq=False)
class SleepRefused:
    """The crew cannot sleep now (working, waking, or a message reached it while it was
    being snapshotted); ``reason`` says which."""

    crew_id: CrewId
    reason: str


class ReleasePurpose(enum.Enum):
    SLEEP = "sleep"
    """The snapshot is durable: the crew reports the topic messages its cursors got
    after the snapshot (:attr:`Released.leftovers`)."""
    SHUTDOWN = "shutdown"
    """The runtime stops with the crew awake: parked as a crash would leave it."""


@attrs.frozen(eq=False)
class Released:
    """The crew's mailboxes are parked (kept durably) and its actor is stopping."""

    crew_id: CrewId
    purpose: ReleasePurpose
    leftovers: tuple[Message, ...] = ()
    """Topic messages its cursors received after the sleep snapshot (not in it), each
    once, cursor by cursor in arrival order (``SLEEP`` only)."""


@attrs.frozen(eq=False)
class CursorsOpen:
    """A crew restored with a supervision has its topic cursors open again; it now
    waits for its :class:`CatchUp`."""

    crew_id: CrewId


@attrs.frozen(eq=False)
class Closed:
    """A finished crew's actor stopped, its mailboxes closed."""

    crew_id: CrewId
    outcome: CrewOutcome


CrewReport = SnapshotTaken | Passivated | SleepRefused | Released | CursorsOpen | Closed
"""Everything a crew tells its supervision."""


class Supervision(Protocol):
    """Where a crew tells its reports: a non-blocking ``tell`` callable from the crew's
    thread (the supervisor's inbox; a report told after the supervisor stopped is
    dropped)."""

    def tell(self, report: CrewReport) -> None: ...


class ConsumedView(Protocol):
    """The mailbox rows a crew consumed that no snapshot reflects yet (the durable hub's
    deferred-acknowledgement ledger); thread-safe."""

    def view(self) -> tuple[tuple[str, str], ...]: ...


# -- commands (supervisor -> crew) ----------------------------------------------------------


@attrs.frozen(eq=False)
class Restore:
    """Recompose the crew from ``snapshot`` instead of starting it (a wake)."""

    snapshot: CrewSnapshot
    supervision: Supervision | None = None
    """If given: the crew reports :class:`CursorsOpen` once its restored cursors are
    open, then reads nothing and handles nothing else until it is told the
    :class:`CatchUp` (the topic messages its cursors missed while they were closed)."""


@attrs.frozen(eq=False)
class CatchUp:
    """What the lifecycle kept for a waking crew: topic messages published from the
    moment it began to sleep (or to wake) until its restored cursors were open, in
    publish order; each cursor catches up on those it matches (once each)."""

    messages: tuple[Message, ...]
    missed: Mapping[CursorFilter, int] = attrs.field(factory=dict)
    """Drops per cursor ``(topic, metadata_match or None)`` while it slept."""


@attrs.frozen(eq=False)
class Deliver:
    """A trigger for a parked agent (a topic message or reply that woke the crew)."""

    message: Message


@attrs.frozen(eq=False)
class Passivate:
    """Sleep request: the crew refuses unless it is waiting for a message; else it
    reports its snapshot, withdraws its live waits, and reports :class:`Passivated`
    (or :class:`SleepRefused` if a wait's outcome was already in flight)."""

    supervision: Supervision
    consumed: ConsumedView | None = None


@attrs.frozen(eq=False)
class Resume:
    """The sleep failed: re-arm every withdrawn wait and go on."""


@attrs.frozen(eq=False)
class Release:
    """Park the mailboxes, close the subscriptions, stop; report :class:`Released`."""

    supervision: Supervision | None
    purpose: ReleasePurpose = ReleasePurpose.SLEEP


@attrs.frozen(eq=False)
class CloseMailboxes:
    """The crew finished and its outcome is durable: close its mailbox registrations
    (later posts are refused with ``MailboxNotFoundError``) and stop the actor, so that a
    finished crew holds no memory; :class:`Closed` is reported from ``on_stop``, after
    every message handled before the stop. Ignored by a crew not finished."""

    supervision: Supervision
    keep_final: bool = True
    """Put the crew's final state in its outcome (``CrewOutcome.final_json``)."""


@attrs.frozen(eq=False)
class End:
    """End the crew now: it fails with ``error_type`` and ``reason`` as its cause (its
    waits withdrawn, ``on_crew_failed`` told, the failure reported to its supervisor,
    which records the outcome and then sends :class:`CloseMailboxes`). Handled between
    two turns; ignored by a crew already finished."""

    error_type: str
    reason: str
