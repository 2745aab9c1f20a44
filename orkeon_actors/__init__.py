"""orkeon_actors: an actor-model runtime for crews of LLM agents.

Everything a user imports lives here::

    import orkeon_actors as ok

    with ok.Runtime.start() as rt:
        client = rt.hub.bind("billing", "scorer")
        client.publish("orders.created", {"id": 42})

Errors are in :mod:`orkeon_actors.errors` (``ok.errors``), all subclasses of
``EventHubError``. The library is silent until ``ok.enable_logging()`` (see
:mod:`orkeon_actors.logs`).
"""

from orkeon_actors import acl, aio, config, errors, middleware, store, tools
from orkeon_actors.config import CrewBlueprint, CrewBuilder, load_crew, register_blueprint, scripted, start_crew
from orkeon_actors.hub import (
    CallerContext,
    EventHub,
    HubClient,
    MailboxReader,
    MailboxRegistration,
    Subscription,
)
from orkeon_actors.logs import StdlibPropagateHandler, disable_logging, enable_logging
from orkeon_actors.middleware.pipeline import EventHubMiddleware
from orkeon_actors.middleware.schema_registry import EventSchemaRegistry, InMemoryEventSchemaRegistry
from orkeon_actors.model import (
    FOREVER,
    NO_DECLARED_SCHEMA_ID,
    WAIT_TIMED_OUT_TOPIC,
    AgentId,
    Budget,
    CancelToken,
    Clock,
    CorrelationId,
    CrewId,
    FiniteWaitTimeout,
    ForeverWaitTimeout,
    MailboxAddress,
    Message,
    MessageId,
    PublishOptions,
    SystemClock,
    VirtualClock,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
)
from orkeon_actors.model.limits import Limits
from orkeon_actors.runtime import Runtime

__version__ = "0.1.0"

__all__ = [
    "FOREVER",
    "NO_DECLARED_SCHEMA_ID",
    "WAIT_TIMED_OUT_TOPIC",
    "AgentId",
    "Budget",
    "CallerContext",
    "CancelToken",
    "Clock",
    "CorrelationId",
    "CrewBlueprint",
    "CrewBuilder",
    "CrewId",
    "EventHub",
    "EventHubMiddleware",
    "EventSchemaRegistry",
    "FiniteWaitTimeout",
    "ForeverWaitTimeout",
    "HubClient",
    "InMemoryEventSchemaRegistry",
    "MailboxAddress",
    "MailboxReader",
    "MailboxRegistration",
    "Message",
    "MessageId",
    "PublishOptions",
    "Runtime",
    "Limits",
    "StdlibPropagateHandler",
    "Subscription",
    "SystemClock",
    "VirtualClock",
    "WaitDescriptor",
    "WaitOnMailbox",
    "WaitOnReply",
    "WaitOnTopic",
    "WaitTimeout",
    "acl",
    "aio",
    "disable_logging",
    "enable_logging",
    "config",
    "errors",
    "load_crew",
    "middleware",
    "register_blueprint",
    "scripted",
    "start_crew",
    "store",
    "tools",
]
