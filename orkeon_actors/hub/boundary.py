"""The crew boundary: what a caller bound to one crew may reach (spec §10, §12.1).

:class:`~orkeon_actors.hub.client.HubClient` (what agents and their tools hold) runs
these checks before it reaches the hub, on every adapter; ``hub.system`` passes them
all. Each refusal is a typed error naming the rule:

* **reserved topics**: only the hub and ``hub.system`` publish on ``_system.*``
  (``ReservedTopicError``), so a ``_system.#`` subscriber sees only the hub's messages;
* **mailbox readers**: the reader of a mailbox is its owner (§10.2): a crew waits on
  ``agent://{its crew}/...`` and ``crew://{its crew}`` only (``EventAclError``);
* **retained values**: a crew reads the global slot and its own crew's slot only
  (``EventAclError``);
* **replies**: only the crew that received a request may answer it; the hub refuses any
  other replier with the same ``UnknownCorrelationError`` as an unknown id
  (:func:`may_reply`).

:func:`bounded_payload` and :func:`check_metadata` apply the input bounds of
:mod:`orkeon_actors.model.limits` to what a caller sends; every path that sends for a
caller (the client, a durable unit of work) runs them before anything is stored or routed.
"""

from __future__ import annotations

from collections.abc import Mapping

from orkeon_actors.errors import EventAclError, ReservedTopicError
from orkeon_actors.hub.port import CallerContext
from orkeon_actors.model.address import RESERVED_TOPIC_PREFIX, MailboxAddress, Scheme, is_reserved_topic
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.limits import Limits, check_metadata_bounds, check_payload_size
from orkeon_actors.model.message import FrozenMap, encode_payload

__all__ = [
    "bounded_payload",
    "check_last_value_scope",
    "check_mailbox_reader",
    "check_metadata",
    "check_publish_topic",
    "may_reply",
]


def bounded_payload(payload: object, limits: Limits) -> bytes:
    """``payload`` encoded (strict JSON unless bytes), or ``LimitExceededError`` when it
    is over ``limits.max_payload_bytes`` (``InvalidArgumentError`` if not encodable)."""
    data = payload if type(payload) is bytes else encode_payload(payload)  # bytes: the hot path, inline
    if len(data) > limits.max_payload_bytes:
        check_payload_size(len(data), limits)
    return data


def check_metadata(metadata: Mapping[str, str] | None) -> None:
    """Bound ``metadata`` even when it is a ready-made :class:`FrozenMap` (which
    ``freeze_metadata`` passes through unchecked); a plain mapping is bounded when it is
    frozen."""
    if metadata is not None and isinstance(metadata, FrozenMap):  # None first: an ABC isinstance is slow
        check_metadata_bounds(metadata)


def check_publish_topic(caller: CallerContext, topic: str) -> None:
    """Raise ``ReservedTopicError`` when a crew (not the system) publishes on a
    ``_system.`` topic."""
    if is_reserved_topic(topic) and not caller.is_system:
        raise ReservedTopicError(
            f"crew {caller.crew_id} cannot publish on {topic!r}: topics starting with {RESERVED_TOPIC_PREFIX!r} "
            "are reserved for messages the hub produces; choose another topic"
        )


def check_mailbox_reader(caller: CallerContext, address: MailboxAddress, client_owner: CrewId | None = None) -> None:
    """Raise ``EventAclError`` unless ``caller`` owns ``address`` (an ``agent://`` or
    ``crew://`` mailbox of its own crew, or the ``client://`` mailbox it registered as
    its owner: ``client_owner``) or is the system."""
    if caller.is_system:
        return
    if address.scheme in (Scheme.AGENT, Scheme.CREW) and address.crew_id == caller.crew_id:
        return
    if address.scheme is Scheme.CLIENT and client_owner is not None and client_owner == caller.crew_id:
        return
    raise EventAclError(
        f"crew {caller.crew_id} cannot read {address}: a mailbox is read only by its owner "
        f"(spec §10.2); read agent://{caller.crew_id}/{{agent}} or crew://{caller.crew_id}",
        source=str(caller.crew_id),
        target=str(address),
        rule="mailbox-owner",
    )


def check_last_value_scope(caller: CallerContext, scope: CrewId | None) -> None:
    """Raise ``EventAclError`` unless ``scope`` is the global slot (``None``), the
    caller's own crew, or the caller is the system."""
    if scope is None or caller.is_system or scope == caller.crew_id:
        return
    raise EventAclError(
        f"crew {caller.crew_id} cannot read the values retained for crew {scope}: a crew reads the "
        "global slot and its own crew's slot only",
        source=str(caller.crew_id),
        target=str(scope),
        rule="last-value-scope",
    )


def may_reply(caller: CallerContext, recipient: object) -> bool:
    """Whether ``caller`` may answer a request sent to the mailbox ``recipient``: the
    system always; a crew when the request went to one of its own ``agent://`` /
    ``crew://`` mailboxes. A request to a ``client://`` or ``a2a://`` mailbox (a process
    outside the hub, known to no crew) is answered by whoever holds its correlation id,
    which is unguessable (``CorrelationId.new``)."""
    if type(recipient) is MailboxAddress and recipient.crew_id == caller.crew_id:
        return True  # the common case first: a reply from the crew the request went to
    if caller.is_system or not isinstance(recipient, MailboxAddress):
        return True
    if recipient.scheme is Scheme.CLIENT or recipient.scheme is Scheme.A2A:
        return True
    return recipient.crew_id == caller.crew_id
