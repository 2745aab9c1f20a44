"""CrewLink policies: the decision the ACL stage enforces (spec §10.2-§10.3, §12.1).

A policy answers one question for one outgoing message: may it go? The answer is an
:class:`AclDecision` that names the :class:`AclRule` that decided, so a refusal can say
exactly why and what to change. Rules are tried in this order:

1. ``target-mismatch`` (deny): the message's ``target_crew_id`` disagrees with the crew
   of its ``target_mailbox`` (spec §6.2: the target crew is derived from the mailbox).
2. ``reply-exempt``: a reply is authorized by its correlation id (§12.1).
3. ``system-exempt``: traffic from (or scoped to) ``CrewId.SYSTEM``, the hub itself.
4. ``no-target``: a global publish or a ``topic://`` post is an offer, not a delivery.
5. ``same-crew``: traffic inside one crew (same crew id); links govern traffic *between*
   crews.
6. The sender declared ``links:`` -> held to them: ``declared-link`` when one of its
   ``outbound``/``bidirectional`` links names the target (and, for a crew-scoped
   publish, authorizes the topic); otherwise ``declared-empty`` (no usable link at all),
   ``declared-no-link`` or ``topic-not-allowed``. The target's declarations are not
   consulted: ``inbound`` never reopens a door the sender closed.
6a. An external A2A agent (``a2a://NAME``, link name ``a2a:NAME``) is never governed by
   the default of rule 7, in either direction: a crew reaches it only through its own
   ``outbound``/``bidirectional`` link naming it (a sender with no ``links:`` is refused,
   ``a2a-unlinked``), and what the agent sends (its answers, posted by the A2A bridge
   as from ``a2a:NAME``) reaches a crew only through that crew's ``inbound`` or
   ``bidirectional`` link naming it (``inbound-grant``, else ``a2a-unlinked``).
7. The sender never declared ``links:`` (or is not registered) -> the policy's default:
   :class:`PermissiveCrewLinkPolicy` lets it pass (``undeclared-permissive``);
   :class:`RestrictiveCrewLinkPolicy` lets it pass only when the target's declaration
   grants it an ``inbound`` (or ``bidirectional``) link (``inbound-grant``), else
   ``undeclared-refused`` (or ``topic-not-allowed`` when the grant excludes the topic).

The target of a message is the crew of its mailbox, the external peer ``client:NAME`` of
a ``client://NAME`` mailbox, the A2A agent ``a2a:NAME`` of an ``a2a://NAME`` mailbox, or
the ``target_crew_id`` of a crew-scoped publish.

Cost: an allowed message costs a few dictionary lookups and allocates nothing (allowed
decisions are shared constants); descriptions are only built for a refusal.
"""

from __future__ import annotations

import abc
import enum
import functools
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import attrs

from orkeon_actors.acl.grammar import LinksBlock
from orkeon_actors.acl.links import A2A_PREFIX, CLIENT_PREFIX, CrewLink
from orkeon_actors.acl.registry import AclRegistry, AclSnapshot
from orkeon_actors.errors import EventAclError
from orkeon_actors.model.address import MailboxAddress, Scheme
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

__all__ = [
    "AclDecision",
    "AclRule",
    "CrewLinkPolicy",
    "PermissiveCrewLinkPolicy",
    "RestrictiveCrewLinkPolicy",
]


class AclRule(enum.Enum):
    """The rule behind an :class:`AclDecision`; its value is the stable name carried by
    ``EventAclError.rule``."""

    TARGET_MISMATCH = "target-mismatch"
    REPLY_EXEMPT = "reply-exempt"
    SYSTEM_EXEMPT = "system-exempt"
    NO_TARGET = "no-target"
    SAME_CREW = "same-crew"
    DECLARED_LINK = "declared-link"
    DECLARED_EMPTY = "declared-empty"
    DECLARED_NO_LINK = "declared-no-link"
    TOPIC_NOT_ALLOWED = "topic-not-allowed"
    UNDECLARED_PERMISSIVE = "undeclared-permissive"
    INBOUND_GRANT = "inbound-grant"
    UNDECLARED_REFUSED = "undeclared-refused"
    A2A_UNLINKED = "a2a-unlinked"


@attrs.frozen
class AclDecision:
    """The verdict on one message.

    For a refusal: ``source`` is the sender's crew id; ``target`` the mailbox address
    (post/send) or the target crew id (crew-scoped publish); ``source_text`` /
    ``target_text`` describe both parties for humans (names and ids); ``reason`` says
    why and what to change. An allowed decision is a shared constant per rule (and per
    link): its ``source``/``target`` are empty, since nobody describes a message that
    passes on the hot path. ``link`` is the link that authorized (or, for
    ``topic-not-allowed``, that named the target but not the topic).
    """

    allowed: bool
    rule: AclRule
    source: str
    target: str
    reason: str
    link: CrewLink | None = None
    source_text: str = ""
    target_text: str = ""

    def error(self) -> EventAclError:
        """The :class:`~orkeon_actors.errors.EventAclError` reporting this refusal: its
        text names sender, target and rule; ``source``, ``target`` and ``rule`` are set
        as attributes."""
        return EventAclError(
            f"ACL refused {self.source_text or self.source} -> {self.target_text or self.target} "
            f"(rule {self.rule.value}): {self.reason}",
            source=self.source,
            target=self.target,
            rule=self.rule.value,
        )

    def raise_if_denied(self) -> None:
        """Raise :meth:`error` unless the message is allowed."""
        if not self.allowed:
            raise self.error()


@runtime_checkable
class CrewLinkPolicy(Protocol):
    """What :class:`~orkeon_actors.acl.AclMiddleware` consults. ``operation`` is the hub
    operation in progress (``publish``, ``post``, ``send``, ``reply``)."""

    def decide(self, message: Message, operation: str = "publish") -> AclDecision: ...


_REASONS = {
    AclRule.REPLY_EXEMPT: "a reply is authorized by its correlation id",
    AclRule.SYSTEM_EXEMPT: "system traffic is exempt",
    AclRule.NO_TARGET: "a message with no target crew is a broadcast: subscribers filter on their own side",
    AclRule.SAME_CREW: "traffic inside one crew is not inter-crew traffic",
    AclRule.UNDECLARED_PERMISSIVE: "the sender never declared links: and the permissive default lets it pass",
    AclRule.DECLARED_LINK: "authorized by a link of the sender",
    AclRule.INBOUND_GRANT: "granted by an inbound or bidirectional link of the target",
}
_ALLOWED = {rule: AclDecision(True, rule, "", "", reason) for rule, reason in _REASONS.items()}


@functools.lru_cache(maxsize=4096)
def _allowed_by(rule: AclRule, link: CrewLink) -> AclDecision:
    return AclDecision(True, rule, "", "", _REASONS[rule], link)


@functools.lru_cache(maxsize=8192)
def _address_text(address: MailboxAddress) -> str:
    return str(address)


@attrs.frozen
class _Parties:
    """Sender and target of a message being refused, described for humans."""

    source_name: str | None  # link name (crew name or client:NAME); None: cannot be named
    target_name: str | None
    source: str  # machine references: crew id, mailbox address or crew id
    target: str
    source_text: str
    target_text: str

    @property
    def source_is_client(self) -> bool:
        return self.source_name is not None and self.source_name.startswith(CLIENT_PREFIX)

    @property
    def target_is_client(self) -> bool:
        return self.target_name is not None and self.target_name.startswith(CLIENT_PREFIX)

    def refuse(self, rule: AclRule, reason: str, link: CrewLink | None = None) -> AclDecision:
        return AclDecision(False, rule, self.source, self.target, reason, link, self.source_text, self.target_text)


def _describe(name: str | None, crew_id: CrewId | None) -> str:
    if name is None:
        return f"unregistered crew id {crew_id}"
    if name.startswith(A2A_PREFIX):
        return f"A2A agent a2a://{name[len(A2A_PREFIX) :]}"
    if name.startswith(CLIENT_PREFIX):
        return f"client {name[len(CLIENT_PREFIX) :]!r} (crew id {crew_id})"
    return f"crew {name!r} (id {crew_id})"


def _parties(message: Message, source_name: str | None, target_name: str | None) -> _Parties:
    mailbox, target_id = message.target_mailbox, message.target_crew_id
    if mailbox is not None and (mailbox.scheme is Scheme.CLIENT or mailbox.scheme is Scheme.A2A):
        target, target_text = str(mailbox), str(mailbox)
    elif mailbox is not None:
        target, target_text = str(mailbox), f"{mailbox} of {_describe(target_name, target_id)}"
    else:
        target = str(target_id)
        target_text = f"topic {message.topic!r} scoped to {_describe(target_name, target_id)}"
    source_id = message.source_crew_id
    return _Parties(source_name, target_name, str(source_id), target, _describe(source_name, source_id), target_text)


def _link_hint(declarer: str, to: str, direction: str, topic: str | None) -> str:
    topics = f", allowed_topics: [{topic}]" if topic is not None else ""
    return f"add {{to: {to}, direction: {direction}{topics}}} to the links: of {declarer!r}"


def _mismatch(message: Message) -> AclDecision:
    mailbox = message.target_mailbox
    assert mailbox is not None
    return AclDecision(
        False,
        AclRule.TARGET_MISMATCH,
        str(message.source_crew_id),
        str(mailbox),
        f"the message's target_crew_id {message.target_crew_id} disagrees with its target_mailbox {mailbox}, "
        f"whose crew is {mailbox.crew_id}; the target crew is derived from the mailbox (spec §6.2): "
        "leave target_crew_id to the hub, or address the mailbox of the crew you mean",
    )


_SYSTEM = CrewId.SYSTEM
_CLIENT = Scheme.CLIENT
_A2A = Scheme.A2A


class _LinkPolicy(abc.ABC):
    """Rules 1-6, shared by both policies; subclasses decide rule 7."""

    def __init__(self, registry: AclRegistry | None = None) -> None:
        self.registry = registry if registry is not None else AclRegistry()

    def decide(self, message: Message, operation: str = "publish") -> AclDecision:
        """Decide whether ``message`` may go. Never raises; see the module docstring
        for the rules."""
        mailbox = message.target_mailbox
        source_id = message.source_crew_id
        target_id = message.target_crew_id
        if mailbox is not None and target_id != mailbox.crew_id:
            return _mismatch(message)
        if operation == "reply":
            return _ALLOWED[AclRule.REPLY_EXEMPT]
        if source_id == _SYSTEM or target_id == _SYSTEM:
            return _ALLOWED[AclRule.SYSTEM_EXEMPT]
        snap = self.registry.snapshot
        if mailbox is not None and mailbox.scheme is _CLIENT:
            target_name: str | None = CLIENT_PREFIX + (mailbox.name or "")
        elif mailbox is not None and mailbox.scheme is _A2A:
            target_name = A2A_PREFIX + (mailbox.name or "")
        elif target_id is None:
            return _ALLOWED[AclRule.NO_TARGET]
        elif target_id == source_id:
            return _ALLOWED[AclRule.SAME_CREW]
        else:
            target_name = snap.names.get(target_id)
        source_name = snap.names.get(source_id)
        if source_name is not None and source_name.startswith(A2A_PREFIX):
            return _from_a2a(snap, message, source_name, target_name)
        # Point-to-point mail carries a synthetic hub topic: the link itself authorizes it.
        topic = None if mailbox is not None else message.topic
        declaration = snap.declaration_of(source_name)
        if declaration.declared:
            for link in declaration.links:
                if (
                    link.to == target_name
                    and link.direction.lets_declarer_send
                    and (topic is None or link.allows_topic(topic))
                ):
                    return _allowed_by(AclRule.DECLARED_LINK, link)
            return _held_to_links(snap, _parties(message, source_name, target_name), declaration, topic)
        if target_name is not None and target_name.startswith(A2A_PREFIX):
            return _parties(message, source_name, target_name).refuse(
                AclRule.A2A_UNLINKED,
                f"{source_name or 'the sender'!r} never declared links:, and an external A2A agent is reached only "
                f"through a link naming it, whatever the policy's default; "
                + _link_hint(source_name or "the sending crew", target_name, "bidirectional", None)
                + " (bidirectional: its answers come back too)",
            )
        return self._undeclared(snap, message, source_name, target_name, topic)

    @abc.abstractmethod
    def _undeclared(
        self, snap: AclSnapshot, message: Message, source_name: str | None, target_name: str | None, topic: str | None
    ) -> AclDecision:
        """Rule 7: the verdict for a sender that never declared links:."""


def _from_a2a(snap: AclSnapshot, message: Message, source_name: str, target_name: str | None) -> AclDecision:
    """Rule 6a, inbound: what the A2A agent ``source_name`` sends reaches a crew only
    through that crew's ``inbound`` or ``bidirectional`` link naming it."""
    for link in snap.declaration_of(target_name).links:
        if link.to == source_name and link.direction.lets_peer_send:
            return _allowed_by(AclRule.INBOUND_GRANT, link)
    parties = _parties(message, source_name, target_name)
    if target_name is None:
        fix = "the target crew id is not registered with the ACL, so no link of it can name the agent"
    else:
        outbound = any(link.to == source_name for link in snap.declaration_of(target_name).links)
        fix = (
            f"its link to {source_name!r} is outbound only: make it bidirectional"
            if outbound
            else _link_hint(target_name, source_name, "bidirectional", None)
        )
    return parties.refuse(
        AclRule.A2A_UNLINKED,
        f"an external A2A agent's messages reach a crew only through an inbound or bidirectional link of that "
        f"crew naming it; {fix}",
    )


def _held_to_links(snap: AclSnapshot, parties: _Parties, declaration: LinksBlock, topic: str | None) -> AclDecision:
    """Rule 6, refusal side: why a sender that declared links: may not send this."""
    source_name = parties.source_name or parties.source  # only a named crew can declare
    target_name = parties.target_name
    usable = [link for link in declaration.links if link.direction.lets_declarer_send]
    naming = [link for link in usable if link.to == target_name]
    if naming:
        return parties.refuse(
            AclRule.TOPIC_NOT_ALLOWED,
            f"the link {naming[0]} of {source_name!r} does not allow topic {topic!r}; add the topic to its "
            "allowed_topics (or leave allowed_topics empty to allow every topic)",
            naming[0],
        )
    count = len(declaration.warnings)
    discarded = (
        f" ({count} entr{'y was' if count == 1 else 'ies were'} discarded as malformed when it was loaded: "
        "see its warnings)"
        if count
        else ""
    )
    if target_name is None:
        fix = (
            "the target crew id is not registered with the ACL, so no link can name it: register it with "
            "AclRegistry.register_crew(name, crew_id=...) and link to that name"
        )
    else:  # an A2A agent's answers come back to the sender: both ways
        direction = "bidirectional" if target_name.startswith(A2A_PREFIX) else "outbound"
        fix = _link_hint(source_name, target_name, direction, topic)
    if not usable:
        return parties.refuse(
            AclRule.DECLARED_EMPTY,
            f"{source_name!r} declared a links: block with no outbound or bidirectional link{discarded}, which "
            f"refuses every inter-crew message it sends; {fix}",
        )
    granted = target_name is not None and any(
        link.direction.lets_peer_send and link.to == source_name for link in snap.declaration_of(target_name).links
    )
    ignored = (
        f" ({target_name!r} grants {source_name!r} an inbound link, but a grant never reopens a door the sender closed)"
        if granted
        else ""
    )
    return parties.refuse(
        AclRule.DECLARED_NO_LINK,
        f"{source_name!r} declared links: and none of its outbound or bidirectional links names "
        f"{target_name or 'the target'}{discarded}{ignored}; {fix}",
    )


class PermissiveCrewLinkPolicy(_LinkPolicy):
    """The default policy: a crew that never declared ``links:`` passes (spec §10.2 rule
    2), so switching the ACL stage on breaks no existing crew; a crew that declared links
    is held to them. An unregistered crew id counts as undeclared and passes."""

    def _undeclared(
        self, snap: AclSnapshot, message: Message, source_name: str | None, target_name: str | None, topic: str | None
    ) -> AclDecision:
        return _ALLOWED[AclRule.UNDECLARED_PERMISSIVE]


class RestrictiveCrewLinkPolicy(_LinkPolicy):
    """The closed-door policy: a sender that never declared ``links:`` is refused unless
    the target's declaration grants it, by name, an ``inbound`` (or ``bidirectional``)
    link whose ``allowed_topics`` cover a crew-scoped publish's topic. A declared sender
    is held to its own links, exactly as under the permissive policy. An unregistered
    crew id has no name, so no crew can grant it anything: it is refused."""

    def _undeclared(
        self, snap: AclSnapshot, message: Message, source_name: str | None, target_name: str | None, topic: str | None
    ) -> AclDecision:
        grants: list[CrewLink] = []
        if source_name is not None and target_name is not None:
            for link in snap.declaration_of(target_name).links:
                if link.to == source_name and link.direction.lets_peer_send:
                    if topic is None or link.allows_topic(topic):
                        return _allowed_by(AclRule.INBOUND_GRANT, link)
                    grants.append(link)
        parties = _parties(message, source_name, target_name)
        if grants:
            return parties.refuse(
                AclRule.TOPIC_NOT_ALLOWED,
                f"the link {grants[0]} granted by {target_name!r} does not allow topic {topic!r}; add the topic "
                "to its allowed_topics (or leave allowed_topics empty to allow every topic)",
                grants[0],
            )
        fix: str
        if source_name is None:
            fix = (
                "the sender's crew id is not registered with the ACL, so no crew can grant it anything: register "
                "it with AclRegistry.register_crew(name, crew_id=...)"
            )
        elif target_name is None:
            fix = (
                "the target crew id is not registered with the ACL: register it with "
                f"AclRegistry.register_crew(name, crew_id=...) and add {{to: {source_name}, direction: inbound}} "
                "to its links:"
            )
        else:
            hints: list[str] = []
            join: Callable[[list[str]], str] = " or ".join
            if parties.target_is_client:
                hints.append(f"{target_name!r} is a client, and a client cannot grant links")
                join = "; ".join
            else:
                hints.append(_link_hint(target_name, source_name, "inbound", topic))
            if parties.source_is_client:
                hints.append(f"{source_name!r} is a client, and a client cannot declare links")
                join = "; ".join
            else:
                hints.append(_link_hint(source_name, target_name, "outbound", topic))
            fix = join(hints)
        return parties.refuse(
            AclRule.UNDECLARED_REFUSED,
            "the sender never declared links: and RestrictiveCrewLinkPolicy refuses undeclared senders unless the "
            f"target grants them an inbound link; {fix}",
        )
