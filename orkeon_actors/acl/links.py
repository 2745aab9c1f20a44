"""The value types of the inter-crew ACL (spec §10.2-§10.3): :class:`Direction` and
:class:`CrewLink`.

A link is one line of a crew's ``links:`` block: *which* peer (``to``, a crew's
``name:`` matched verbatim, ``client:NAME`` for an external peer, or ``a2a:NAME`` for an
external A2A agent configured under that name, also written ``a2a://NAME``), *which way*
(``direction``) and *which topics* a crew-scoped publish may carry (``allowed_topics``,
empty meaning every topic). Both types are immutable and validated at construction:
a :class:`CrewLink` that exists is a link the ACL can read, which is why the YAML reader
discards malformed entries instead of building half-valid links.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from typing import Final

import attrs

from orkeon_actors.errors import InvalidArgumentError, YamlInputError
from orkeon_actors.hub.routing import topic_matches
from orkeon_actors.model.address import validate_topic_pattern
from orkeon_actors.model.ids import CrewId

__all__ = [
    "A2A_PREFIX",
    "CLIENT_PREFIX",
    "RESERVED_PREFIX",
    "AclConfigError",
    "AclYamlError",
    "CrewLink",
    "Direction",
    "a2a_link_name",
    "client_link_name",
    "validate_crew_name",
]

RESERVED_PREFIX: Final = "_"
"""Crew names starting with it are the hub's (``_system``): no crew may take one."""

CLIENT_PREFIX: Final = "client:"
"""The reserved prefix that names an external peer (spec §10.2.1): ``to: "client:studio"``
names the process reached at ``client://studio``."""

A2A_PREFIX: Final = "a2a:"
"""The reserved prefix that names an external A2A agent: ``to: "a2a:weather"`` (or
``to: "a2a://weather"``, read the same) names the agent reached at ``a2a://weather``,
whose card URL the runtime's configuration gives (``docs/a2a-calling.md``). Traffic with
such an agent always needs a link, in both directions, whatever the policy's default."""

_CLIENT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


class AclConfigError(InvalidArgumentError):
    """An ACL declaration cannot be accepted: a malformed :class:`CrewLink` built in
    Python, a crew YAML with no readable ``name:``, a YAML syntax error, or a crew
    registration that conflicts with an earlier one. (A malformed *entry* of a YAML
    ``links:`` block is not an error: it is discarded with a warning, see
    :func:`orkeon_actors.acl.parse_links`.)"""


class AclYamlError(AclConfigError, YamlInputError):
    """A crew YAML the ``links:`` grammar reads was refused by the one guarded loader
    (:mod:`orkeon_actors.guarded_yaml`): an :class:`AclConfigError`, as every YAML
    problem of this grammar is, and a :class:`~orkeon_actors.errors.YamlInputError`
    with the position and the bound."""


class Direction(enum.Enum):
    """Which way a link lets traffic flow, read from the declaring crew A towards the
    named peer B (spec §10.3):

    ========================  ================================================
    ``outbound``              A can send to B, but not the other way around
    ``inbound``               B can send to A, but not the other way around
    ``bidirectional``         both directions
    ========================  ================================================
    """

    OUTBOUND = "outbound"
    INBOUND = "inbound"
    BIDIRECTIONAL = "bidirectional"

    @property
    def lets_declarer_send(self) -> bool:
        """True for ``outbound`` and ``bidirectional``: the declaring crew may send to
        the named peer. This is what the sender's own links are checked for."""
        return self is not Direction.INBOUND

    @property
    def lets_peer_send(self) -> bool:
        """True for ``inbound`` and ``bidirectional``: the named peer may send to the
        declaring crew. Only :class:`~orkeon_actors.acl.RestrictiveCrewLinkPolicy`
        consults it, for a sender that never declared ``links:``."""
        return self is not Direction.OUTBOUND

    @classmethod
    def parse(cls, value: object) -> Direction:
        """Read a direction: exactly ``outbound``, ``inbound`` or ``bidirectional``
        (or a :class:`Direction`). Nothing else is guessed at, not even a different
        case: a guessed direction would be an authorization nobody wrote.

        Raises :class:`AclConfigError` for any other value.
        """
        if isinstance(value, Direction):
            return value
        if isinstance(value, str):
            for member in cls:
                if member.value == value:
                    return member
        raise AclConfigError(f"unreadable direction {value!r}: write exactly one of outbound, inbound or bidirectional")


def validate_crew_name(name: object, *, what: str = "crew name") -> str:
    """Return ``name`` if it can name a crew in the ACL, else raise :class:`AclConfigError`.

    A crew name is a non-empty string without leading or trailing whitespace (names
    are matched verbatim, so invisible whitespace would make a link silently miss).
    Names starting with ``client:`` are reserved for external peers, and names starting
    with ``_`` for the hub (``_system`` is the hub itself, as ``CrewId.SYSTEM``): every
    configuration path (YAML, the builder, TypeScript through the canonical schema, the
    ACL registry, the supervisor's factories) refuses them.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise AclConfigError(
            f"invalid {what} {name!r}: a crew name is a non-empty string with no leading or trailing whitespace"
        )
    if name.startswith(RESERVED_PREFIX):
        raise AclConfigError(
            f"invalid {what} {name!r}: names starting with {RESERVED_PREFIX!r} are reserved for the hub "
            f"({CrewId.SYSTEM!r} is the hub itself); start the name with a letter or a digit"
        )
    if name.startswith(CLIENT_PREFIX):
        raise AclConfigError(
            f"invalid {what} {name!r}: the prefix {CLIENT_PREFIX!r} is reserved for external peers; "
            "register a client with AclRegistry.register_client(name)"
        )
    if name.startswith(A2A_PREFIX):
        raise AclConfigError(
            f"invalid {what} {name!r}: the prefix {A2A_PREFIX!r} is reserved for external A2A agents; "
            "configure one with Runtime.start(a2a_agents={NAME: CARD_URL})"
        )
    return name


def client_link_name(client_name: str) -> str:
    """The name a link uses for the external peer reached at ``client://{client_name}``
    (``"studio"`` -> ``"client:studio"``). Raises :class:`AclConfigError` for a name
    ``client://`` would not accept."""
    if not isinstance(client_name, str) or not _CLIENT_NAME_RE.match(client_name):
        raise AclConfigError(
            f"invalid client name {client_name!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or a digit (the name of its client:// mailbox)"
        )
    return CLIENT_PREFIX + client_name


def a2a_link_name(agent_name: str) -> str:
    """The name a link uses for the external A2A agent reached at ``a2a://{agent_name}``
    (``"weather"`` -> ``"a2a:weather"``). Raises :class:`AclConfigError` for a name
    ``a2a://`` would not accept."""
    if not isinstance(agent_name, str) or not _CLIENT_NAME_RE.match(agent_name):
        raise AclConfigError(
            f"invalid A2A agent name {agent_name!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or a digit (the name of its a2a:// address)"
        )
    return A2A_PREFIX + agent_name


def _link_to(value: str) -> str:
    """``a2a://NAME`` is the address spelling of the link name ``a2a:NAME``: read the same."""
    if isinstance(value, str) and value.startswith("a2a://"):
        return A2A_PREFIX + value[len("a2a://") :]
    return value


def _direction(value: Direction | str) -> Direction:
    return Direction.parse(value)


def _validate_to(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    if isinstance(value, str) and value.startswith(CLIENT_PREFIX):
        client_link_name(value[len(CLIENT_PREFIX) :])
        return
    if isinstance(value, str) and value.startswith(A2A_PREFIX):
        a2a_link_name(value[len(A2A_PREFIX) :])
        return
    validate_crew_name(value, what="link target (to:)")


def _topics(value: Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise AclConfigError(
            f"allowed_topics must be a list of topics, got {value!r}; write [{value!r}] for a single topic"
        )
    topics = tuple(value)
    for topic in topics:
        try:
            validate_topic_pattern(topic)
        except InvalidArgumentError as exc:
            raise AclConfigError(f"invalid entry in allowed_topics: {exc}") from None
    return topics


@attrs.frozen
class CrewLink:
    """One authorization of a crew's ``links:`` block.

    * ``to``: the peer, by the ``name:`` of its crew YAML (matched verbatim),
      ``client:NAME`` for the external peer reached at ``client://NAME`` (§10.2.1), or
      ``a2a:NAME`` (also written ``a2a://NAME``) for the external A2A agent reached at
      ``a2a://NAME``.
    * ``direction``: see :class:`Direction`; a string is parsed with
      :meth:`Direction.parse`.
    * ``allowed_topics``: the topics a crew-scoped publish over this link may carry.
      Empty (the default) authorizes every topic. Entries may use the subscription
      wildcards (``*`` one word, ``#`` zero or more). The list never constrains
      point-to-point mail (post/send): that is authorized by the link itself.

    Raises :class:`AclConfigError` when any field is malformed.
    """

    to: str = attrs.field(converter=_link_to, validator=_validate_to)
    direction: Direction = attrs.field(converter=_direction)
    allowed_topics: tuple[str, ...] = attrs.field(default=(), converter=_topics)

    @classmethod
    def client(cls, name: str, direction: Direction | str, allowed_topics: Iterable[str] | None = None) -> CrewLink:
        """A link to the external peer reached at ``client://{name}``."""
        return cls(client_link_name(name), direction, allowed_topics)

    @classmethod
    def a2a(cls, name: str, direction: Direction | str, allowed_topics: Iterable[str] | None = None) -> CrewLink:
        """A link to the external A2A agent reached at ``a2a://{name}``."""
        return cls(a2a_link_name(name), direction, allowed_topics)

    @property
    def is_a2a(self) -> bool:
        """True when the link names an external A2A agent (``a2a:NAME``)."""
        return self.to.startswith(A2A_PREFIX)

    @property
    def is_client(self) -> bool:
        """True when the link names an external peer (``client:NAME``)."""
        return self.to.startswith(CLIENT_PREFIX)

    def allows_topic(self, topic: str) -> bool:
        """True when a crew-scoped publish on ``topic`` may travel this link: the list
        is empty, or one of its entries matches ``topic``."""
        return not self.allowed_topics or any(topic_matches(pattern, topic) for pattern in self.allowed_topics)

    def __str__(self) -> str:
        topics = f", allowed_topics: [{', '.join(self.allowed_topics)}]" if self.allowed_topics else ""
        return f"{{to: {self.to}, direction: {self.direction.value}{topics}}}"
