"""Canonical endpoints of a sent row (sender-owned history requirements, MESSAGE-R02).

An :class:`Endpoint` is what a row stores for its sender and its recipient: the
``kind`` (``agent``, ``crew``, ``client``, ``topic``), the immutable canonical ``id``
(``crew/agent`` for an agent, the crew id, the client or topic name) and, as
display-only metadata, the readable forms the endpoint had when the message was sent:
its ``address`` and, for an agent or crew endpoint whose crew ran in the runtime then,
the crew's ``name:`` (its blueprint's name, :meth:`EventHub.crew_name
<orkeon_actors.hub.port.EventHub.crew_name>`; ``None`` when the hub knew none). Replies
and automation use ``kind`` and ``id``, never ``address`` or ``name``: a readable form
shown later is historical (:meth:`Endpoint.display` marks it so). A ``client://`` peer
is a ``client`` endpoint, never an agent.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from orkeon_actors.errors import InvalidArgumentError, SentHistoryUnavailableError
from orkeon_actors.model.address import MailboxAddress, Scheme
from orkeon_actors.model.ids import AgentId, CrewId

__all__ = ["Endpoint", "EndpointKind", "agent_endpoint", "endpoint_of", "parse_sender"]


class EndpointKind(enum.Enum):
    AGENT = "agent"
    CREW = "crew"
    CLIENT = "client"
    TOPIC = "topic"
    A2A = "a2a"


_KINDS: Final = {
    Scheme.AGENT: EndpointKind.AGENT,
    Scheme.CREW: EndpointKind.CREW,
    Scheme.CLIENT: EndpointKind.CLIENT,
    Scheme.TOPIC: EndpointKind.TOPIC,
    Scheme.A2A: EndpointKind.A2A,
}


@attrs.frozen
class Endpoint:
    """One end of a sent row: ``kind`` and canonical ``id`` (what replies and automation
    use), the readable ``address`` and the crew's ``name`` at publication time (display
    only, historical; ``name`` is ``None`` when no crew name was known)."""

    kind: EndpointKind
    id: str
    address: str
    name: str | None = None

    @property
    def key(self) -> str:
        """The canonical text a store indexes (``kind:id``)."""
        return f"{self.kind.value}:{self.id}"

    def display(self) -> str:
        """The canonical id with its readable forms, marked historical: ``sales/alice
        (then agent://sales/alice; sales-team, name at send time)``."""
        name = "" if self.name is None else f"; {self.name}, name at send time"
        return f"{self.id} (then {self.address}{name})"


def endpoint_of(address: MailboxAddress, name: str | None = None) -> Endpoint:
    """The canonical endpoint of a mailbox address; ``name`` is the crew's readable name
    at this instant (display only), kept for agent and crew endpoints only."""
    kind = _KINDS[address.scheme]
    if kind is EndpointKind.AGENT:
        canonical = f"{address.crew_id}/{address.agent_id}"
    elif kind is EndpointKind.CREW:
        canonical = str(address.crew_id)
    else:
        canonical = address.name or ""
        name = None  # a client's, topic's or A2A agent's address is its readable form; no crew names it
    return Endpoint(kind, canonical, str(address), name)


def agent_endpoint(crew_id: CrewId, agent_id: AgentId, name: str | None = None) -> Endpoint:
    """The endpoint of the agent ``crew_id``/``agent_id`` (a sender); ``name`` as for
    :func:`endpoint_of`."""
    return endpoint_of(MailboxAddress.agent(crew_id, agent_id), name)


def parse_sender(address: str | None = None, *, canonical_id: str | None = None) -> Endpoint:
    """The agent endpoint named by an ``agent://crew/agent`` address or by its canonical
    id ``crew/agent`` (exactly one of them). Raises ``InvalidArgumentError`` for anything
    else and ``SentHistoryUnavailableError`` for a non-agent address (only agents own a
    sent history)."""
    if (address is None) == (canonical_id is None):
        raise InvalidArgumentError("name the sender by one address or one canonical id, not both and not neither")
    if canonical_id is not None:
        crew, sep, agent = canonical_id.partition("/")
        if not sep or not crew or not agent or "/" in agent:
            raise InvalidArgumentError(
                f"{canonical_id!r} is not an agent's canonical id: write it as CREW/AGENT (e.g. billing/scorer)"
            )
        return agent_endpoint(CrewId(crew), AgentId(agent))
    assert address is not None
    parsed = MailboxAddress.parse(address)
    if parsed.scheme is not Scheme.AGENT:
        raise SentHistoryUnavailableError(
            f"{address} is a {parsed.scheme.value}:// address: only agents (agent://crew/agent) own a sent history"
        )
    assert parsed.crew_id is not None and parsed.agent_id is not None
    return agent_endpoint(parsed.crew_id, parsed.agent_id)
