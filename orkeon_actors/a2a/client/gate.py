"""The ACL on calls of external A2A agents, both ways (``acl/policy.py``, rule 6a).

A remote agent is the ACL peer ``a2a:NAME`` (registered with
:meth:`~orkeon_actors.acl.AclRegistry.register_a2a`, which gives it the crew id its
answers are sent with). :class:`A2AGate` asks the runtime's ACL policy the questions the
hub's ACL stage asks of a post, with the same probe messages:

* :meth:`A2AGate.outbound`: may this crew's agent send to ``a2a://NAME``? (a link of the
  crew naming ``a2a:NAME``, ``outbound`` or ``bidirectional``);
* :meth:`A2AGate.inbound`: may ``a2a://NAME`` send to this agent? (a link of the crew
  naming it, ``inbound`` or ``bidirectional``).

Each raises :class:`~orkeon_actors.errors.EventAclError` with the policy's reason and
fix. A runtime without an ACL stage has no gate (``policy=None``): every crew may call
every configured agent, as every crew may post to every mailbox.
"""

from __future__ import annotations

from collections.abc import Iterable

from orkeon_actors.acl.policy import CrewLinkPolicy
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import AgentId, CrewId, MessageId
from orkeon_actors.model.message import Message

__all__ = ["A2AGate"]

_PROBE_TOPIC = "_system.post"


class A2AGate:
    """The ACL questions about the remote agents ``names`` (see the module docstring).
    ``peer_ids`` are their registered crew ids, minted by the policy's registry when it
    has one (``CrewId.new()`` otherwise)."""

    def __init__(self, policy: CrewLinkPolicy | None, names: Iterable[str], clock: Clock) -> None:
        self.policy = policy
        self.clock = clock
        registry = getattr(policy, "registry", None)
        self.peer_ids: dict[str, CrewId] = {}
        for name in names:
            register = getattr(registry, "register_a2a", None)
            self.peer_ids[name] = register(name) if callable(register) else CrewId.new()

    def outbound(self, crew_id: CrewId, agent_id: AgentId | None, name: str) -> None:
        """Raise ``EventAclError`` unless ``crew_id`` may send to ``a2a://name``."""
        if self.policy is None:
            return
        probe = Message(
            MessageId.new(),
            _PROBE_TOPIC,
            crew_id,
            self.clock.now(),
            source_agent_id=agent_id,
            target_mailbox=MailboxAddress.a2a(name),
        )
        self.policy.decide(probe, "post").raise_if_denied()

    def inbound(self, name: str, to: MailboxAddress) -> None:
        """Raise ``EventAclError`` unless ``a2a://name`` may send to the mailbox ``to``."""
        if self.policy is None:
            return
        probe = Message(
            MessageId.new(),
            _PROBE_TOPIC,
            self.peer_ids[name],
            self.clock.now(),
            target_crew_id=to.crew_id,
            target_mailbox=to,
        )
        self.policy.decide(probe, "post").raise_if_denied()
