"""Every error the hub raises, in one place.

All of them derive from :class:`EventHubError`, so ``except EventHubError`` catches
whatever the hub refuses. Each message says what was wrong and what to do next.
Invalid arguments (a zero timeout, ``FOREVER`` on ``send``) raise subclasses that are
*also* :class:`ValueError`, so generic argument handling keeps working.
"""

from __future__ import annotations

__all__ = [
    "EventHubError",
    "InvalidArgumentError",
    "InvalidMailboxAddressError",
    "InvalidIdError",
    "MailboxNotFoundError",
    "MailboxAlreadyRegisteredError",
    "SendTimeoutError",
    "UnknownCorrelationError",
    "ReservedTopicError",
    "EventAclError",
    "EventValidationError",
    "DuplicateMessageError",
    "BudgetExhaustedError",
    "CancelledError",
    "ToolValidationError",
    "HubStoppedError",
    "RateLimitedError",
    "StoreError",
    "StoreLockedError",
    "StoreVersionError",
    "StoreWriteError",
    "BrokerError",
    "BrokerUnavailableError",
    "BrokerNackError",
    "UnroutableError",
    "ExclusiveConsumerError",
    "SignatureError",
    "ToolDefinitionError",
    "ModelError",
    "ModelConfigError",
    "FleetControlError",
    "FleetTimeoutError",
]


class EventHubError(Exception):
    """Base class of every error raised by orkeon_actors."""


class InvalidArgumentError(EventHubError, ValueError):
    """An argument is out of its domain (a non-positive timeout, FOREVER on send, ...)."""


class InvalidIdError(InvalidArgumentError):
    """A crew, agent, message or correlation id is malformed."""


class InvalidMailboxAddressError(InvalidArgumentError):
    """A mailbox address does not follow one of the four schemes of spec §6.2."""


class MailboxNotFoundError(EventHubError, LookupError):
    """A post or send targeted a mailbox nobody registered."""

    def __init__(self, address: object) -> None:
        super().__init__(
            f"no mailbox is registered at {address}: register it with "
            f"hub.register_mailbox({str(address)!r}) before posting to it, "
            "or check the address for a typo"
        )
        self.address = address


class MailboxAlreadyRegisteredError(InvalidArgumentError):
    """A mailbox address was registered twice."""


class SendTimeoutError(EventHubError, TimeoutError):
    """A ``send`` got no reply before its timeout (spec §16.1)."""


class UnknownCorrelationError(EventHubError, LookupError):
    """A reply names a correlation id that no pending ``send`` holds (unknown,
    already answered, or expired)."""


class ReservedTopicError(EventHubError):
    """An agent tried to publish on a ``_system.`` topic (spec §9.2)."""


class EventAclError(EventHubError):
    """The ACL refused a message: no CrewLink authorizes it (spec §10)."""

    def __init__(self, message: str, *, source: str = "", target: str = "", rule: str = "") -> None:
        super().__init__(message)
        self.source = source
        self.target = target
        self.rule = rule


class EventValidationError(EventHubError):
    """A message declares a schema id nobody registered (spec §12.3), or a schema
    registration conflicts with an existing one."""


class DuplicateMessageError(EventHubError):
    """Raised by a receive stage to drop a duplicate; the hub catches it at the
    delivery site and no consumer ever sees it (spec §12.2)."""


class BudgetExhaustedError(EventHubError):
    """The agent's budget ran out while it waited (spec §9.4). Never a TimeoutError:
    a supervisor must be able to tell "no message in time" from "no budget left"."""


class CancelledError(EventHubError):
    """The call's CancelToken fired before the call completed."""


class ToolValidationError(EventHubError, ValueError):
    """An agent tool was called with arguments that break its contract (spec §5.1).

    ``field`` names the offending argument (or ``None`` when the call as a whole is wrong).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class HubStoppedError(EventHubError):
    """The runtime was stopped; the call cannot proceed. Start a new Runtime."""


class RateLimitedError(EventHubError):
    """A rate-limit stage refused a message; ``retry_after`` says in how many seconds a
    retry can succeed."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StoreError(EventHubError):
    """The durable store (``Runtime.start(store=...)``) could not do what was asked."""


class StoreLockedError(StoreError):
    """Another runtime (in this process or another one) holds the store file open.

    One runtime owns a store at a time. Stop the other one, or pass ``lock_timeout=`` in
    ``StoreConfig`` to wait for it to stop."""

    def __init__(self, message: str, *, path: str = "", holder_pid: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.holder_pid = holder_pid


class StoreVersionError(StoreError):
    """The store file's schema is newer than this release knows, or the file is not an
    orkeon store at all. Nothing was changed in the file."""

    def __init__(self, message: str, *, path: str = "", found: int | None = None, known: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.found = found
        self.known = known


class StoreWriteError(StoreError):
    """A transaction could not be committed (disk full, I/O error, ...). Nothing of the
    failed write is in the store; the operation that asked for it was not performed."""


class BrokerError(EventHubError):
    """The message broker of the distributed hub (RabbitMQ) refused or could not take a
    message; the text says which and what to do."""


class BrokerUnavailableError(BrokerError):
    """The broker could not be reached (or did not confirm) within the call's bound."""


class BrokerNackError(BrokerError):
    """The broker refused a message it could not take (``basic.nack``)."""


class UnroutableError(BrokerError):
    """The broker returned a ``mandatory`` message: no queue was bound to its routing key."""


class ExclusiveConsumerError(BrokerError):
    """A queue is consumed exclusively by another connection (a second gateway for one host)."""


class SignatureError(BrokerError):
    """A cross-host message failed verification: bad or missing signature, unknown signing
    host, a sender not living on the signing host, a recipient that does not match the
    routing key, an expired message or a replay."""
class ToolDefinitionError(InvalidArgumentError):
    """A tool definition cannot be rendered in the style asked for (a name the provider
    refuses, for instance). The message names the rule; rename or reshape the tool."""


class ModelError(EventHubError):
    """A model adapter could not get the next step from its provider: a refused request
    (4xx other than 408/409/429), retries exhausted on rate limits, 5xx, timeouts or
    connection failures, or a response that is not the documented wire format. Raised
    from ``Model.complete``, it fails the agent's crew with this message as the reason.

    ``provider`` and ``model`` say who was asked, ``status`` is the last HTTP status
    (``None`` when no response came), ``attempts`` how many requests were made and
    ``retryable`` whether the last failure was of a kind that is retried."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        status: int | None = None,
        attempts: int = 1,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status = status
        self.attempts = attempts
        self.retryable = retryable


class ModelConfigError(InvalidArgumentError):
    """A model adapter or a model reference in crew configuration is invalid (unknown
    provider, missing ``model``, a negative price, an SDK extra not installed...). The
    message says which setting and what to do."""


class FleetControlError(BrokerError):
    """A host refused a control request (spawn, stop): the text names its error."""


class FleetTimeoutError(BrokerError, TimeoutError):
    """A host did not answer a control request within its bound."""
