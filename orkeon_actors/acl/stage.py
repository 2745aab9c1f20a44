"""The ACL middleware stage (spec §12, stage 3).

Register it with the runtime::

    registry = ok.acl.AclRegistry()
    rt = ok.Runtime.start(middleware=[ok.acl.AclMiddleware(registry)])          # permissive
    rt = ok.Runtime.start(middleware=[ok.acl.AclMiddleware(
        ok.acl.RestrictiveCrewLinkPolicy(registry))])                           # closed door

Where it checks (spec §10.3, §12.1): once, on the sending side, in the caller's thread,
for every publish-path operation (publish, post, send, and the request half of a send)
except replies, which its policy exempts. It never checks on receive: re-checking would
refuse a message that already passed. A refusal raises
:class:`~orkeon_actors.errors.EventAclError` to the caller of publish/post/send, and the
message is delivered to nobody.
"""

from __future__ import annotations

from loguru import logger

from orkeon_actors.acl.policy import CrewLinkPolicy, PermissiveCrewLinkPolicy
from orkeon_actors.acl.registry import AclRegistry
from orkeon_actors.hub.pipeline import Next, current_operation
from orkeon_actors.model.message import Message

__all__ = ["AclMiddleware"]


class AclMiddleware:
    """Checks every outgoing message against a :class:`CrewLinkPolicy`.

    ``registry_or_policy``: an :class:`AclRegistry` (wrapped in the default
    :class:`PermissiveCrewLinkPolicy`), a policy (``RestrictiveCrewLinkPolicy(registry)``
    or any object with ``decide(message, operation) -> AclDecision``), or ``None`` for a
    fresh registry under the permissive policy (reachable as :attr:`registry`).

    The stage holds no lock and no per-message state: a decision reads the registry's
    current immutable snapshot. It raises ``EventAclError`` (rule, sender and target in
    its attributes and text) for a refused message and passes everything else unchanged.
    """

    def __init__(self, registry_or_policy: AclRegistry | CrewLinkPolicy | None = None) -> None:
        if registry_or_policy is None or isinstance(registry_or_policy, AclRegistry):
            self.policy: CrewLinkPolicy = PermissiveCrewLinkPolicy(registry_or_policy)
        elif callable(getattr(registry_or_policy, "decide", None)):
            self.policy = registry_or_policy
        else:
            raise TypeError(
                f"AclMiddleware takes an AclRegistry or a policy with decide(message, operation), "
                f"got {registry_or_policy!r}"
            )

    @property
    def registry(self) -> AclRegistry | None:
        """The registry the policy reads, when it exposes one."""
        registry = getattr(self.policy, "registry", None)
        return registry if isinstance(registry, AclRegistry) else None

    def on_publish(self, message: Message, next: Next) -> Message:
        """Pass ``message`` on if the policy allows it; raise ``EventAclError`` if not."""
        decision = self.policy.decide(message, current_operation())
        if not decision.allowed:
            logger.debug(
                "ACL refused message {} {} -> {} (rule {})",
                message.id,
                decision.source,
                decision.target,
                decision.rule.value,
            )
            raise decision.error()
        return next(message)

    def on_receive(self, message: Message, next: Next) -> Message:
        """Receive traffic is never re-checked (spec §10.3): passes ``message`` on."""
        return next(message)

    def __repr__(self) -> str:
        return f"AclMiddleware({type(self.policy).__name__})"
