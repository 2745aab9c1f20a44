"""Calling external A2A agents from a crew (``docs/a2a-calling.md``).

``Runtime.start(a2a_agents={"weather": "http://host:port"})`` configures them; agents
reach one through the ``ask_agent`` tool (``rt.a2a_agents.tool()``) or by posting to its
``a2a://NAME`` address; the ACL applies both ways (``links:`` naming ``a2a:NAME``).
Needs the ``a2a`` extra (``pip install 'orkeon-actors[a2a]'``: the official ``a2a-sdk``).
"""

from orkeon_actors.a2a.client.agents import A2AAgents
from orkeon_actors.a2a.client.answers import TaskProgress
from orkeon_actors.a2a.client.bridge import A2ABridge
from orkeon_actors.a2a.client.config import DEFAULT_TIMEOUT, RemoteAgent, remote_agents
from orkeon_actors.a2a.client.gate import A2AGate
from orkeon_actors.a2a.client.remote import RemoteAgents
from orkeon_actors.a2a.client.tool import ASK_AGENT, ask_agent_tool

__all__ = [
    "ASK_AGENT",
    "DEFAULT_TIMEOUT",
    "A2AAgents",
    "A2ABridge",
    "A2AGate",
    "RemoteAgent",
    "RemoteAgents",
    "TaskProgress",
    "ask_agent_tool",
    "remote_agents",
]
