"""A parked agent's wait as data and back (Orkeon EventHub & Crew Lifecycle
specification, §8.1, §9.2): the hub's :data:`~orkeon_actors.model.options.WaitDescriptor`
of a :class:`~orkeon_actors.crew.state.PendingWait` kind and the reverse, which message
satisfies a parked wait, and the timeout message of a wait that expired while its crew
slept. Pure functions, shared by the crew actor (parking, re-arming, delivering) and the
lifecycle (waking).
"""

from __future__ import annotations

from datetime import datetime

from orkeon_actors.crew.state import OnMailbox, OnReply, OnTopic, PendingWait
from orkeon_actors.hub.port import REPLY_TOPIC
from orkeon_actors.hub.routing import cursor_matches
from orkeon_actors.model.ids import CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import WaitDescriptor, WaitOnMailbox, WaitOnReply, WaitOnTopic

__all__ = ["WaitKind", "descriptor_of", "kind_of", "timed_out_message", "wait_matches"]

WaitKind = OnTopic | OnMailbox | OnReply


def descriptor_of(kind: WaitKind) -> WaitDescriptor:
    """The hub wait that re-arms a parked wait of ``kind``."""
    if isinstance(kind, OnTopic):
        return WaitOnTopic(kind.topic, kind.metadata_match)
    if isinstance(kind, OnMailbox):
        return WaitOnMailbox(kind.address)
    return WaitOnReply(kind.correlation)


def kind_of(descriptor: WaitDescriptor, crew_id: CrewId) -> WaitKind:
    """The parked wait (as snapshot data) of crew ``crew_id`` on ``descriptor``."""
    if isinstance(descriptor, WaitOnTopic):
        return OnTopic(descriptor.topic, crew_id, descriptor.metadata_match)
    if isinstance(descriptor, WaitOnMailbox):
        return OnMailbox(descriptor.address)
    return OnReply(descriptor.correlation)


def wait_matches(wait: PendingWait, crew_id: CrewId, message: Message) -> bool:
    """Whether ``message`` satisfies ``wait`` of crew ``crew_id`` (a topic wait: the
    cursor predicate :func:`~orkeon_actors.hub.routing.cursor_matches`; a mailbox: its
    address; a reply: its correlation)."""
    kind = wait.kind
    if isinstance(kind, OnTopic):
        return cursor_matches(kind.topic, kind.metadata_match, crew_id, message)
    if isinstance(kind, OnMailbox):
        return message.target_mailbox == kind.address
    return message.correlation_id == kind.correlation and message.topic == REPLY_TOPIC


def timed_out_message(crew_id: CrewId, wait: PendingWait, now: datetime) -> Message:
    """The ``WaitTimedOutMessage`` (spec §9.2) of ``wait``, expired while its crew slept.
    Its id is derived from the wait id, so a restart produces the same message (and
    ``processed_messages`` recognises it)."""
    kind = wait.kind
    original = (
        kind.topic
        if isinstance(kind, OnTopic)
        else str(kind.address)
        if isinstance(kind, OnMailbox)
        else str(kind.correlation)
    )
    try:
        message_id = MessageId(wait.wait_id)
    except ValueError:
        message_id = MessageId.new()
    return Message.wait_timed_out(
        message_id=message_id,
        at=now,
        original_topic=original,
        wait_id=wait.wait_id,
        started_at=wait.started_at,
        target_crew_id=crew_id,
    )
