"""``SnapshotActivator``: recompose a crew from its factory and its snapshot, and hand
it the trigger that woke it (spec §3.3 ``CrewActivator``, §7.3, §8).

A crew's *code* (models, tools, orchestration) comes from the factory registered under
its name, called again at every activation; its *data* (conversations, parked calls,
budgets used, orchestration state) from its last snapshot. Activation writes nothing:
a process dying during it leaves the crew asleep on that snapshot, and the same trigger
wakes it again after the restart.

The activator is split in steps so that its owner (the supervisor) can register the new
crew before the crew's thread runs:

1. :meth:`load`: the snapshot to restore, or ``None`` (no such sleeping crew, or the
   trigger was already processed by it: ``processed_messages``);
2. :meth:`build`: the crew actor, started from the factory but not begun, with its
   acknowledgements deferred to its next snapshot;
3. :meth:`restore`: tell the actor to restore from the snapshot (re-registering its
   mailboxes reloads their kept posts; an expired wait gets its timeout message) and
   deliver a topic or reply trigger to the agent waiting for it. Returns the ids this
   activation processes (recorded in ``processed_messages`` by the next snapshot).

:meth:`activate` (the port) runs the three. Every method runs on the owner's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs
import pykka
from loguru import logger

from orkeon_actors.crew.agent import Agent
from orkeon_actors.crew.crew_actor import CrewActor, CrewObserver, EventBinding, restore_crew
from orkeon_actors.crew.handover import CursorFilter
from orkeon_actors.crew.mode import Orchestration
from orkeon_actors.crew.protocol import Deliver, Supervision
from orkeon_actors.crew.snapshot import CrewSnapshot, from_json
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.port import POST_TOPIC, SEND_TOPIC, DeferredAcks, DurableEventHub
from orkeon_actors.lifecycle.ports import DurableCrewStateStore
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

__all__ = ["BuiltCrew", "CrewBlueprint", "CrewFactory", "CrewSource", "SnapshotActivator"]


@attrs.frozen
class CrewBlueprint:
    """What a factory returns: everything code (models, tools) a crew is made of. The
    snapshot holds the data; the blueprint the definitions (spec §8: agents are data,
    their models are not)."""

    agents: Sequence[Agent]
    orchestration: Orchestration
    cls: type[CrewActor] = CrewActor
    bindings: Sequence[EventBinding] = ()
    idle_timeout: float | None = None
    observer: CrewObserver | None = None


CrewFactory = Callable[[CrewId], CrewBlueprint]
"""``factory(crew_id) -> CrewBlueprint``, registered under the crew's name."""

CrewSource = CrewFactory | CrewBlueprint
"""What may be registered under a crew's name: a factory, called at every spawn and
wake, or a :class:`CrewBlueprint` itself, shared by every crew of that name (each wake
skips the factory call: the cheaper wake for crews whose definitions do not depend on
their id). A shared blueprint's agents and models serve many crews at once, so they
must hold no per-crew state; this package's models hold none (a ``ScriptedModel``
derives its position from the conversation)."""


@attrs.frozen(eq=False)
class BuiltCrew:
    """A crew actor started from its factory, not begun yet."""

    crew_id: CrewId
    name: str
    ref: pykka.ActorRef[CrewActor]
    idle_timeout: float | None
    """The blueprint's, else the supervisor's default, else the crew class's."""
    ledger: DeferredAcks
    """The mailbox messages it consumes until its next snapshot reflects them."""
    volatile: Mapping[str, frozenset[str]] = attrs.field(factory=dict)
    """Per agent id: the cursor topic patterns it opted out of durability
    (``Agent(volatile_cursors=...)``)."""


class SnapshotActivator:
    """The :class:`~orkeon_actors.lifecycle.ports.CrewActivator` of a durable hub (see
    the module docstring). ``factories`` is read at each activation (a mapping the owner
    may update); ``idle_timeout`` is the default for blueprints that give none;
    ``on_activity(crew_id, status)`` is passed to every crew actor."""

    def __init__(
        self,
        hub: DurableEventHub,
        store: DurableCrewStateStore,
        factories: Mapping[str, CrewSource],
        *,
        idle_timeout: float | None = None,
        on_activity: Callable[[CrewId, CrewStatus], None] | None = None,
        on_cursor: Callable[[CrewId, CursorFilter], None] | None = None,
        on_checkpoint: Callable[[CrewId], None] | None = None,
    ) -> None:
        self.hub = hub
        self.store = store
        self.factories = factories
        self.idle_timeout = idle_timeout
        self.on_activity = on_activity
        self.on_cursor = on_cursor
        """Told (on the crew's thread) when an agent parks on a cursor its crew's last
        snapshot does not hold (``CrewActor(on_cursor=...)``)."""
        self.on_checkpoint = on_checkpoint
        """Told (on the crew's thread) when an agent's model answered with hub
        side-effect tool calls (``CrewActor(on_checkpoint=...)``)."""

    def load(
        self, crew_id: CrewId, trigger: Message | None, read: Mapping[CrewId, str] | None = None
    ) -> CrewSnapshot | None:
        """The snapshot to wake ``crew_id`` from; ``None`` when it has none or already
        processed ``trigger`` (a topic message or reply; posts are acknowledged with the
        snapshot instead). ``read``: the snapshot texts of a batch read by
        :meth:`read_many` in the same supervisor turn (a crew absent from it has no
        snapshot); without it, one read. Raises ``SnapshotVersionError`` for an
        unreadable snapshot."""
        if trigger is not None and trigger.topic not in (POST_TOPIC, SEND_TOPIC):
            if self.store.is_processed(str(trigger.id), crew_id):
                logger.debug("crew {}: trigger {} already processed, ignored", crew_id, trigger.id)
                return None
        if read is None:
            return self.store.load(crew_id)
        text = read.get(crew_id)
        return None if text is None else from_json(text)

    def read_many(self, crew_ids: Sequence[CrewId]) -> Mapping[CrewId, str]:
        """The snapshot texts of ``crew_ids`` (those that have one) in one read, for
        :meth:`load`: a burst of expiries reads its batch at once. Valid only until the
        owner writes a snapshot of one of them (the supervisor uses it within the turn
        that read it)."""
        return self.store.load_many(crew_ids)

    def build(self, name: str, crew_id: CrewId) -> BuiltCrew:
        """Start the actor of crew ``crew_id`` from the factory (or the shared blueprint)
        registered as ``name`` (not begun:
        tell it ``start_crew`` or :meth:`restore`). ``InvalidArgumentError`` if no
        factory is registered under ``name``; the factory's own errors propagate."""
        factory = self.factories.get(name)
        if factory is None:
            raise InvalidArgumentError(
                f"no crew factory registered under {name!r}: call supervisor.register_factory({name!r}, fn) first"
            )
        bp = factory if isinstance(factory, CrewBlueprint) else factory(crew_id)
        ledger = self.hub.defer_acks(crew_id)  # before the crew registers its mailboxes
        ref = bp.cls.start(
            self.hub,
            agents=bp.agents,
            orchestration=bp.orchestration,
            name=name,
            crew_id=crew_id,
            bindings=bp.bindings,
            idle_timeout=bp.idle_timeout,
            observer=bp.observer,
            on_activity=self.on_activity,
            on_cursor=self.on_cursor,
            on_checkpoint=self.on_checkpoint,
        )
        timeout = bp.idle_timeout if bp.idle_timeout is not None else self.idle_timeout
        if timeout is None:
            timeout = bp.cls.idle_timeout
        volatile = {str(a.agent_id): a.volatile_cursors for a in bp.agents if a.volatile_cursors}
        return BuiltCrew(crew_id, name, ref, timeout, ledger, volatile)

    def restore(
        self,
        crew: BuiltCrew,
        snapshot: CrewSnapshot,
        trigger: Message | None,
        *,
        supervision: Supervision | None = None,
        handed_over: bool = False,
    ) -> list[str]:
        """Tell ``crew`` to restore from ``snapshot`` and deliver ``trigger`` (a topic
        message or a reply; a post is in its mailbox already). Returns the ids this
        activation processes: the waits already expired (their timeout messages) and
        the trigger.

        ``supervision`` (the supervisor's inbox): the crew reports ``CursorsOpen`` there
        once its topic cursors are open again and then holds everything until
        ``hand_over`` gives it the topic messages kept while they were closed; ``handed_over``: the trigger is among
        those (it is not delivered here)."""
        now = self.hub.clock.now()
        triggers = [w.wait_id for w in snapshot.pending_waits if w.expires_at is not None and w.expires_at <= now]
        restore_crew(crew.ref, snapshot, supervision=supervision)
        if trigger is not None and trigger.topic not in (POST_TOPIC, SEND_TOPIC):
            triggers.append(str(trigger.id))
            if not handed_over:
                crew.ref.tell(Deliver(trigger))
        return triggers

    def activate(self, crew_id: CrewId, trigger: Message | None) -> BuiltCrew | None:
        """Load, build and restore ``crew_id``; ``None`` when there is nothing to
        activate (no snapshot, or ``trigger`` already processed)."""
        snapshot = self.load(crew_id, trigger)
        if snapshot is None:
            return None
        crew = self.build(snapshot.name, crew_id)
        self.restore(crew, snapshot, trigger)
        return crew
