"""Fixtures of the ACL tests: a runtime with the ACL stage and a small world of crews.

A :class:`World` registers crews with the ACL registry (or deliberately does not), gives
each one a bound client and an agent mailbox, and tells whether a message arrived:
posts are checked with ``MailboxRegistration.depth()`` (an actor ask queued after the
post's tell, so no sleep is needed) and publishes with ``Subscription.drain()``
(publishes are delivered synchronously to subscriptions).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs
import pytest

import orkeon_actors as ok
from orkeon_actors.acl import (
    AclMiddleware,
    AclRegistry,
    CrewLink,
    CrewLinkPolicy,
    LinksBlock,
    PermissiveCrewLinkPolicy,
    RestrictiveCrewLinkPolicy,
)

POLICIES = {"permissive": PermissiveCrewLinkPolicy, "restrictive": RestrictiveCrewLinkPolicy}


@attrs.define
class Crew:
    """One crew of a test: its id, name (None if unregistered), client and mailbox."""

    id: ok.CrewId
    name: str | None
    client: ok.HubClient
    mailbox: ok.MailboxRegistration

    @property
    def address(self) -> str:
        return str(self.mailbox.address)

    def subscribe(self, topic: str = "#") -> ok.Subscription:
        return self.client.subscribe(topic)


class World:
    """A runtime with an ACL stage over ``registry``, and helpers to build crews."""

    def __init__(self, runtime: ok.Runtime, registry: AclRegistry) -> None:
        self.rt = runtime
        self.hub = runtime.hub
        self.registry = registry
        self._closers: list[ok.MailboxRegistration | ok.Subscription] = []

    def crew(
        self,
        name: str | None,
        links: Sequence[CrewLink] | LinksBlock | None = None,
        *,
        yaml: str | None = None,
    ) -> Crew:
        """A crew named ``name`` (``None``: a crew id never registered with the ACL)
        declaring ``links`` (``None``: never declared), or read from ``yaml``."""
        if yaml is not None:
            crew_id = self.registry.register_crew_yaml(yaml)
            name = self.registry.name_of(crew_id)
        elif name is None:
            crew_id = ok.CrewId.new()
        else:
            crew_id = self.registry.register_crew(name, links=links)
        mailbox = self.hub.register_mailbox(f"agent://{crew_id}/inbox")
        self._closers.append(mailbox)
        return Crew(crew_id, name, self.hub.bind(crew_id, "agent"), mailbox)

    def client(self, name: str) -> tuple[ok.HubClient, ok.MailboxRegistration]:
        """An external peer: registered as ``client:NAME``, bound with its own crew id,
        and its ``client://NAME`` mailbox."""
        crew_id = self.registry.register_client(name)
        mailbox = self.hub.register_mailbox(f"client://{name}")
        self._closers.append(mailbox)
        return self.hub.bind(crew_id, "gateway"), mailbox

    def subscribe(self, crew: Crew, topic: str = "#") -> ok.Subscription:
        sub = crew.subscribe(topic)
        self._closers.append(sub)
        return sub

    def close(self) -> None:
        for item in reversed(self._closers):
            item.close()
        self._closers.clear()


def start_world(policy: str | CrewLinkPolicy = "permissive") -> tuple[ok.Runtime, World]:
    registry = AclRegistry()
    chosen = POLICIES[policy](registry) if isinstance(policy, str) else policy
    registry = getattr(chosen, "registry", registry)
    rt = ok.Runtime.start(middleware=[AclMiddleware(chosen)])
    return rt, World(rt, registry)


@pytest.fixture
def permissive() -> Iterator[World]:
    rt, world = start_world("permissive")
    try:
        yield world
    finally:
        world.close()
        rt.stop()


@pytest.fixture
def restrictive() -> Iterator[World]:
    rt, world = start_world("restrictive")
    try:
        yield world
    finally:
        world.close()
        rt.stop()


@pytest.fixture(params=sorted(POLICIES))
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """Parametrised over both policies: for behaviour that must not depend on it."""
    rt, w = start_world(str(request.param))
    try:
        yield w
    finally:
        w.close()
        rt.stop()


def outbound(to: str, *topics: str) -> CrewLink:
    return CrewLink(to, "outbound", topics)


def inbound(to: str, *topics: str) -> CrewLink:
    return CrewLink(to, "inbound", topics)


def bidirectional(to: str, *topics: str) -> CrewLink:
    return CrewLink(to, "bidirectional", topics)
