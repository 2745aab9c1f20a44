"""The agent card of an exposed crew (A2A v1.0 ``AgentCard``), from its blueprint.

Every field the SDK's proto marks required is set: ``name`` (the crew's name),
``description`` (``a2a.description``, else the crew's description, else a sentence
naming the crew), ``version`` (``a2a.version``), ``supported_interfaces`` (the JSON-RPC
endpoint, protocol version 1.0; the same endpoint answers v0.3 clients), capabilities
(streaming; push notifications), input and output modes (text and JSON), ``skills``
(``a2a.skills``, else one skill named after the crew), and the security scheme: HTTP
bearer, required on every call (``security_requirements``), since the server refuses
any call without a caller's token.
"""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from orkeon_actors.config.blueprint import CrewBlueprint

__all__ = ["BEARER", "MODES", "agent_card"]

BEARER = "bearer"
"""The name of the card's security scheme."""
MODES = ["text/plain", "application/json"]
"""The input and output modes of every exposed crew."""


def agent_card(blueprint: CrewBlueprint, url: str) -> AgentCard:
    """The card of ``blueprint`` (which has an ``a2a:`` block) served at ``url``."""
    exposure = blueprint.a2a
    if exposure is None:
        raise ValueError(f"crew {blueprint.name!r} has no a2a: block, so it is not exposed")
    description = exposure.description or blueprint.description or f"The orkeon crew {blueprint.name}."
    skills = [
        AgentSkill(
            id=skill.id,
            name=skill.name or skill.id,
            description=skill.description,
            tags=list(skill.tags) or ["orkeon"],
            examples=list(skill.examples),
        )
        for skill in exposure.skills
    ] or [AgentSkill(id=blueprint.name, name=blueprint.name, description=description, tags=["orkeon", "crew"])]
    return AgentCard(
        name=blueprint.name,
        description=description,
        version=exposure.version,
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_1_0
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="the caller's token, given by the operator of orkeon a2a"
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList(list=[])})],
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=skills,
    )
