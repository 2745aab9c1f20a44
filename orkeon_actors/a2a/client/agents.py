"""``A2AAgents``: what ``Runtime.start(a2a_agents=...)`` builds (``rt.a2a_agents``).

It puts together, for the configured external A2A agents:

* :attr:`A2AAgents.remote`: the connections (:class:`~orkeon_actors.a2a.client.remote.RemoteAgents`)
  on the runtime's I/O loop;
* :attr:`A2AAgents.gate`: the ACL both ways (:class:`~orkeon_actors.a2a.client.gate.A2AGate`),
  read from the runtime's ACL stage (each agent registered as the peer ``a2a:NAME``);
* :attr:`A2AAgents.bridge`: the ``a2a://NAME`` mailboxes (:class:`~orkeon_actors.a2a.client.bridge.A2ABridge`);
* :meth:`A2AAgents.tool`: the ``ask_agent`` tool to give agents.

:meth:`A2AAgents.close` (run by ``Runtime.stop``) unregisters the mailboxes and closes
the connections.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from orkeon_actors.a2a.client.bridge import A2ABridge
from orkeon_actors.a2a.client.config import RemoteAgent, remote_agents
from orkeon_actors.a2a.client.gate import A2AGate
from orkeon_actors.a2a.client.remote import RemoteAgents
from orkeon_actors.a2a.client.tool import ask_agent_tool
from orkeon_actors.acl.policy import CrewLinkPolicy
from orkeon_actors.actors.io_loop import IoLoop
from orkeon_actors.crew.agent import Tool
from orkeon_actors.hub.port import EventHub
from orkeon_actors.model.clock import Clock

__all__ = ["A2AAgents"]


class A2AAgents:
    """The external A2A agents of a runtime (see the module docstring).

    Raises ``InvalidArgumentError`` for a bad configuration and
    ``MailboxAlreadyRegisteredError`` when an ``a2a://NAME`` mailbox is taken."""

    def __init__(
        self,
        config: Mapping[str, str | RemoteAgent | Mapping[str, Any]],
        *,
        hub: EventHub,
        loop: IoLoop,
        clock: Clock,
        policy: CrewLinkPolicy | None,
    ) -> None:
        agents = remote_agents(config)
        self.remote = RemoteAgents(agents, loop)
        self.gate = A2AGate(policy, agents, clock)
        self.bridge = A2ABridge(hub, self.remote, self.gate)

    @property
    def names(self) -> tuple[str, ...]:
        """The configured names."""
        return self.remote.names

    def tool(self, names: Iterable[str] | None = None) -> Tool:
        """The ``ask_agent`` tool for ``names`` (default: all), its description built from
        their cards (fetched now: raises ``RemoteAgentError`` when one cannot be read)."""
        return ask_agent_tool(self.remote, self.gate, names)

    def close(self) -> None:
        """Unregister the mailboxes and close the connections; idempotent."""
        self.bridge.close()
        self.remote.close()

    def __repr__(self) -> str:
        return f"A2AAgents({list(self.names)})"
