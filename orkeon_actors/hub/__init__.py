"""The EventHub port, the caller-bound client, routing, and the adapters."""

from orkeon_actors.hub.client import HubClient
from orkeon_actors.hub.memory import InMemoryEventHub
from orkeon_actors.hub.port import (
    CallerContext,
    EventHub,
    MailboxLease,
    MailboxReader,
    MailboxRegistration,
    Subscription,
)
from orkeon_actors.hub.routing import topic_matches

__all__ = [
    "CallerContext",
    "EventHub",
    "HubClient",
    "InMemoryEventHub",
    "MailboxLease",
    "MailboxReader",
    "MailboxRegistration",
    "Subscription",
    "topic_matches",
]
