"""Mailbox addresses (spec §6.2) and topic names.

Five schemes, and nothing else::

    agent://{crew_id}/{agent_id}   an agent's mailbox
    crew://{crew_id}               a crew's mailbox (its internal router)
    topic://{topic}                alias of a broadcast topic: posting there publishes
    client://{name}                a process outside the hub (a UI, a gateway)
    a2a://{name}                   an external A2A agent configured under that name
                                   (posting there calls it: docs/a2a-calling.md)

``MailboxAddress.parse`` is the single entry point and raises
:class:`~orkeon_actors.errors.InvalidMailboxAddressError` with the exact reason.
``str(address)`` gives back the canonical string, so parse/str round-trips.
"""

from __future__ import annotations

import enum
import functools
import re

import attrs

from orkeon_actors.errors import InvalidArgumentError, InvalidIdError, InvalidMailboxAddressError
from orkeon_actors.model.ids import AgentId, CrewId
from orkeon_actors.model.limits import check_topic_bounds

__all__ = [
    "MailboxAddress",
    "RESERVED_TOPIC_PREFIX",
    "Scheme",
    "is_reserved_topic",
    "validate_topic",
    "validate_topic_pattern",
]

RESERVED_TOPIC_PREFIX = "_system."
"""Topics only the hub (and ``hub.system``) publish on (spec §9.2): the timeouts, posts,
requests and replies it produces."""


def is_reserved_topic(topic: str) -> bool:
    """True for a ``_system.`` topic (or the bare ``_system``)."""
    return topic == "_system" or topic.startswith(RESERVED_TOPIC_PREFIX)


_TOPIC_RE = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
_PATTERN_WORD_RE = re.compile(r"[A-Za-z0-9_-]+\Z|\*\Z|#\Z")


def validate_topic(topic: str) -> str:
    """Return ``topic`` if it is a concrete topic name, else raise ``InvalidArgumentError``.

    A topic is dot-separated words of letters, digits, ``_`` and ``-``, at most
    ``MAX_TOPIC_BYTES`` long and ``MAX_TOPIC_WORDS`` words (``LimitExceededError``
    beyond).
    """
    if isinstance(topic, str):
        check_topic_bounds(topic)
    if not isinstance(topic, str) or not _TOPIC_RE.match(topic):
        raise InvalidArgumentError(
            f"invalid topic {topic!r}: use dot-separated words of letters, digits, '_' or '-' "
            "(for example 'orders.created'); wildcards are only allowed when subscribing"
        )
    return topic


def validate_topic_pattern(pattern: str) -> str:
    """Return ``pattern`` if it is a valid subscription pattern: a topic whose words may
    also be ``*`` (exactly one word) or ``#`` (zero or more words), AMQP-style, within
    the same bounds as a topic."""
    if isinstance(pattern, str):
        check_topic_bounds(pattern)
    if (
        not isinstance(pattern, str)
        or not pattern
        or not all(_PATTERN_WORD_RE.match(word) for word in pattern.split("."))
    ):
        raise InvalidArgumentError(
            f"invalid topic pattern {pattern!r}: use dot-separated words of letters, digits, "
            "'_' or '-', where a whole word may be '*' (one word) or '#' (zero or more words)"
        )
    return pattern


class Scheme(enum.Enum):
    AGENT = "agent"
    CREW = "crew"
    TOPIC = "topic"
    CLIENT = "client"
    A2A = "a2a"


_SCHEMES = {s.value: s for s in Scheme}


@attrs.frozen(repr=False, cache_hash=True)
class MailboxAddress:
    """A parsed, validated mailbox address. Build one with :meth:`parse` or the
    ``agent()/crew()/topic()/client()`` constructors."""

    scheme: Scheme
    crew_id: CrewId | None = None
    agent_id: AgentId | None = None
    name: str | None = None  # topic name, client name or A2A agent name

    @staticmethod
    def parse(value: str | MailboxAddress) -> MailboxAddress:
        """Parse ``value`` (or return it unchanged if it already is an address).

        Raises ``InvalidMailboxAddressError`` for an empty string, an unknown scheme,
        missing or extra path segments, or invalid crew/agent/topic/client names.
        """
        if isinstance(value, MailboxAddress):
            return value
        if not isinstance(value, str):
            raise InvalidMailboxAddressError(
                f"a mailbox address must be a string like 'agent://crew/agent', got {type(value).__name__}"
            )
        return _parse_cached(value)

    @classmethod
    def agent(cls, crew_id: str, agent_id: str) -> MailboxAddress:
        if type(crew_id) is CrewId and type(agent_id) is AgentId:  # validated already: shared, not copied
            return cls(Scheme.AGENT, crew_id, agent_id)
        return cls.parse(f"agent://{crew_id}/{agent_id}")

    @classmethod
    def crew(cls, crew_id: str) -> MailboxAddress:
        if type(crew_id) is CrewId:  # validated already: shared, not copied
            return cls(Scheme.CREW, crew_id)
        return cls.parse(f"crew://{crew_id}")

    @classmethod
    def topic(cls, topic: str) -> MailboxAddress:
        return cls.parse(f"topic://{topic}")

    @classmethod
    def client(cls, name: str) -> MailboxAddress:
        return cls.parse(f"client://{name}")

    @classmethod
    def a2a(cls, name: str) -> MailboxAddress:
        """The address of the external A2A agent configured as ``name``."""
        return cls.parse(f"a2a://{name}")

    @property
    def target_crew_id(self) -> CrewId | None:
        """The crew this address belongs to (spec §6.1: derived from the mailbox), or
        ``None`` for ``topic://``, ``client://`` and ``a2a://``."""
        return self.crew_id

    def __str__(self) -> str:
        if self.scheme is Scheme.AGENT:
            return f"agent://{self.crew_id}/{self.agent_id}"
        if self.scheme is Scheme.CREW:
            return f"crew://{self.crew_id}"
        return f"{self.scheme.value}://{self.name}"

    def __repr__(self) -> str:
        return f"MailboxAddress({str(self)!r})"


@functools.lru_cache(maxsize=4096)
def _parse_cached(value: str) -> MailboxAddress:
    if not value:
        raise InvalidMailboxAddressError(
            "empty mailbox address: use agent://{crew}/{agent}, crew://{crew}, topic://{topic}, client://{name} "
            "or a2a://{name}"
        )
    scheme_text, sep, rest = value.partition("://")
    if not sep:
        raise InvalidMailboxAddressError(
            f"mailbox address {value!r} has no scheme: write it as agent://{{crew}}/{{agent}}, "
            "crew://{crew}, topic://{topic}, client://{name} or a2a://{name}"
        )
    scheme = _SCHEMES.get(scheme_text)
    if scheme is None:
        raise InvalidMailboxAddressError(
            f"unknown scheme {scheme_text!r} in {value!r}: the schemes are agent, crew, topic, client and a2a"
        )
    segments = rest.split("/")
    expected = 2 if scheme is Scheme.AGENT else 1
    if any(not s for s in segments) or len(segments) != expected:
        shape = {
            Scheme.AGENT: "agent://{crew}/{agent}",
            Scheme.CREW: "crew://{crew}",
            Scheme.TOPIC: "topic://{topic}",
            Scheme.CLIENT: "client://{name}",
            Scheme.A2A: "a2a://{name}",
        }[scheme]
        problem = "missing" if len([s for s in segments if s]) < expected else "extra"
        raise InvalidMailboxAddressError(f"{problem} path segment in {value!r}: a {scheme.value} address is {shape}")
    try:
        if scheme is Scheme.AGENT:
            return MailboxAddress(Scheme.AGENT, CrewId(segments[0]), AgentId(segments[1]))
        if scheme is Scheme.CREW:
            return MailboxAddress(Scheme.CREW, CrewId(segments[0]))
        if scheme is Scheme.TOPIC:
            return MailboxAddress(Scheme.TOPIC, name=validate_topic(segments[0]))
        if not _CLIENT_RE.match(segments[0]):
            what = "client name" if scheme is Scheme.CLIENT else "A2A agent name"
            raise InvalidMailboxAddressError(
                f"invalid {what} {segments[0]!r} in {value!r}: use letters, digits, '.', '_' or '-'"
            )
        return MailboxAddress(scheme, name=segments[0])
    except InvalidMailboxAddressError:
        raise
    except (InvalidIdError, InvalidArgumentError) as exc:
        raise InvalidMailboxAddressError(f"invalid mailbox address {value!r}: {exc}") from None


_CLIENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
