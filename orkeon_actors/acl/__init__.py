"""Inter-crew ACL (spec §10): the ``links:`` grammar, CrewLink policies and the ACL
middleware stage.

A crew reaches another only where a declaration says so::

    import orkeon_actors as ok
    from orkeon_actors.acl import AclMiddleware, AclRegistry, RestrictiveCrewLinkPolicy

    registry = AclRegistry()
    billing = registry.register_crew_yaml(BILLING_YAML)     # name:, agents:, links:
    fraud = registry.register_crew("fraud-crew")            # every crew registers its name
    rt = ok.Runtime.start(middleware=[AclMiddleware(registry)])

The rules are stated in :mod:`orkeon_actors.acl.policy` and in ``docs/acl.md``.
"""

from orkeon_actors.acl.grammar import (
    CrewSpec,
    LinksBlock,
    LinkWarning,
    load_crew_file,
    load_crew_yaml,
    load_links,
    parse_links,
)
from orkeon_actors.acl.links import (
    A2A_PREFIX,
    CLIENT_PREFIX,
    AclConfigError,
    AclYamlError,
    CrewLink,
    Direction,
    a2a_link_name,
    client_link_name,
    validate_crew_name,
)
from orkeon_actors.acl.policy import (
    AclDecision,
    AclRule,
    CrewLinkPolicy,
    PermissiveCrewLinkPolicy,
    RestrictiveCrewLinkPolicy,
)
from orkeon_actors.acl.registry import AclRegistry, AclSnapshot
from orkeon_actors.acl.stage import AclMiddleware

__all__ = [
    "A2A_PREFIX",
    "CLIENT_PREFIX",
    "AclConfigError",
    "AclDecision",
    "AclMiddleware",
    "AclRegistry",
    "AclRule",
    "AclSnapshot",
    "AclYamlError",
    "CrewLink",
    "CrewLinkPolicy",
    "CrewSpec",
    "Direction",
    "LinkWarning",
    "LinksBlock",
    "PermissiveCrewLinkPolicy",
    "RestrictiveCrewLinkPolicy",
    "a2a_link_name",
    "client_link_name",
    "load_crew_file",
    "load_crew_yaml",
    "load_links",
    "parse_links",
    "validate_crew_name",
]
