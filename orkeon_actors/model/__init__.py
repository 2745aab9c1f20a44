"""Value types: ids, addresses, messages, options, time and cancellation."""

from orkeon_actors.model.address import MailboxAddress, Scheme, validate_topic, validate_topic_pattern
from orkeon_actors.model.cancel import Budget, CancelToken
from orkeon_actors.model.clock import Clock, SystemClock, VirtualClock
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId, MessageId
from orkeon_actors.model.message import (
    NO_DECLARED_SCHEMA_ID,
    WAIT_TIMED_OUT_TOPIC,
    FrozenMap,
    Message,
)
from orkeon_actors.model.options import (
    FOREVER,
    FiniteWaitTimeout,
    ForeverWaitTimeout,
    PublishOptions,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
)

__all__ = [
    "AgentId",
    "Budget",
    "CancelToken",
    "Clock",
    "CorrelationId",
    "CrewId",
    "FOREVER",
    "FiniteWaitTimeout",
    "ForeverWaitTimeout",
    "FrozenMap",
    "MailboxAddress",
    "Message",
    "MessageId",
    "NO_DECLARED_SCHEMA_ID",
    "PublishOptions",
    "Scheme",
    "SystemClock",
    "VirtualClock",
    "WAIT_TIMED_OUT_TOPIC",
    "WaitDescriptor",
    "WaitOnMailbox",
    "WaitOnReply",
    "WaitOnTopic",
    "WaitTimeout",
    "validate_topic",
    "validate_topic_pattern",
]
