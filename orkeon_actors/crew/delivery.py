"""How things reach a crew actor (Orkeon EventHub & Crew Lifecycle specification, §8):
the actor's own messages (its start, a wait's outcome, mail, a bound event, a query),
the functions that tell them (:func:`start_crew`, :func:`restore_crew`,
:func:`hand_over`, :func:`query_crew`), the :class:`Activity` count of messages in
flight and the :class:`DeliveryGate` a simulation puts in front of a crew, the
:class:`CrewObserver` that records its trace, and the :class:`EventBinding` of
``on_event``. The lifecycle's commands are in :mod:`orkeon_actors.crew.protocol`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs
import pykka

from orkeon_actors.crew.handover import CursorFilter
from orkeon_actors.crew.protocol import CatchUp, Restore, Supervision
from orkeon_actors.crew.snapshot import CrewSnapshot
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = [
    "Activity",
    "Bound",
    "CrewObserver",
    "DeliveryGate",
    "EventBinding",
    "Mail",
    "Query",
    "Start",
    "WaitDone",
    "WaitTeller",
    "hand_over",
    "query_crew",
    "restore_crew",
    "start_crew",
]


class CrewObserver(Protocol):
    """Receives a crew's trace (the simulation's recorder implements it)."""

    def record(self, crew_id: str, agent_id: str | None, kind: str, detail: str) -> None: ...


class DeliveryGate(Protocol):
    """Where a crew's actor messages go instead of its inbox when it has a gate: every
    delivery to the crew (a wait's outcome, mail, a bound event, the start) is
    ``submit``-ted there, and the gate decides when the crew receives it. Without a gate
    deliveries are told to the actor directly. (Simulations do not use one: they run
    every turn on their own scheduler, :mod:`orkeon_actors.sim.scheduler`.)"""

    def submit(self, ref: pykka.ActorRef[Any], message: Any) -> None: ...


class Activity:
    """Counts actor messages told to crews and not yet handled (quiescence detection)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_flight = 0
        self.sequence = 0

    def begin(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.sequence += 1

    def end(self) -> None:
        with self._lock:
            self.in_flight -= 1


@attrs.frozen
class EventBinding:
    """``on_event``: messages on ``topic`` (a pattern) land in ``deliver_to``."""

    topic: str
    deliver_to: MailboxAddress


# -- the crew actor's own messages ---------------------------------------------------


@attrs.frozen(eq=False)
class Start:
    pass


@attrs.frozen(eq=False)
class WaitDone:
    agent_id: AgentId
    wait_id: object
    outcome: Message | BaseException


@attrs.frozen(eq=False)
class Mail:
    """Mail taken from an idle agent's mailbox (``agent_id``) or from ``crew://``."""

    agent_id: AgentId | None
    wait_id: object
    outcome: Message | BaseException


class Telling(Protocol):
    """What a :class:`WaitTeller` tells (the crew actor's ``tell``)."""

    def tell(self, message: Any) -> None: ...


class WaitTeller:
    """The ``on_done`` of one hub wait of a crew (a parked call's wait, an idle agent's
    or ``crew://``'s mailbox watch): tells the crew ``kind(agent_id, self, outcome)``
    from the settling thread. The teller is also the wait's token: the crew compares the
    ``wait_id`` of what it is told with the teller it holds, so a withdrawn wait's late
    outcome is told apart without minting an id (48 bytes where a closure and its id
    were ≈ 350 per parked wait)."""

    __slots__ = ("agent_id", "crew", "kind")

    def __init__(self, crew: Telling, kind: type[WaitDone] | type[Mail], agent_id: AgentId | None) -> None:
        self.crew = crew
        self.kind = kind
        self.agent_id = agent_id

    def __call__(self, outcome: Message | BaseException) -> None:
        self.crew.tell(self.kind(self.agent_id, self, outcome))  # type: ignore[arg-type]


@attrs.frozen(eq=False)
class Bound:
    binding: EventBinding
    message: Message


@attrs.frozen(eq=False)
class Query:
    what: str


CrewT = TypeVar("CrewT", bound="CrewActor")
"""Any :class:`CrewActor` subclass: the helpers below take ``ActorRef[YourCrew]``."""


def start_crew(ref: pykka.ActorRef[CrewT], activity: Activity | None = None, gate: DeliveryGate | None = None) -> None:
    """Begin a started crew actor (registers its mailboxes, starts its orchestration).
    Pass the crew's ``activity`` counter if it has one, its ``gate`` if it has one (the
    start is then submitted to the gate like any other delivery)."""
    if gate is not None:
        gate.submit(ref, Start())
        return
    if activity is not None:
        activity.begin()
    ref.tell(Start())


def restore_crew(
    ref: pykka.ActorRef[CrewT],
    snapshot: CrewSnapshot,
    activity: Activity | None = None,
    gate: DeliveryGate | None = None,
    supervision: Supervision | None = None,
) -> None:
    """Begin a started crew actor from ``snapshot`` (a wake) instead of from scratch
    (through its ``gate`` if it has one). With a ``supervision`` (the lifecycle
    supervisor) the crew reports :class:`CursorsOpen` once its cursors are open again
    and then waits, its waits not re-armed and anything told to it held, until
    :func:`hand_over` gives it the topic messages published while its cursors were closed."""
    message = Restore(snapshot, supervision)
    if gate is not None:
        gate.submit(ref, message)
        return
    if activity is not None:
        activity.begin()
    ref.tell(message)


def hand_over(
    ref: pykka.ActorRef[CrewT], messages: Sequence[Message], missed: Mapping[CursorFilter, int] | None = None
) -> None:
    """Give a crew restored with a ``supervision`` the topic messages kept for it (in
    publish order): each cursor catches up on those it matches and did not receive,
    once each, then the crew goes on (:class:`CatchUp`). ``missed``: drops per cursor
    key while it slept."""
    ref.tell(CatchUp(tuple(messages), dict(missed or {})))


def query_crew(ref: pykka.ActorRef[CrewT], what: str, timeout: float | None = 10.0) -> Any:
    """Ask a crew for ``snapshot``, ``status`` or ``summary`` (from outside the actor)."""
    return ref.ask(Query(what), timeout=timeout)
