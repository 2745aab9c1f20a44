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
    "LeaseRevokedError",
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
    "SchedulerFailedError",
    "RateLimitedError",
    "StoreError",
    "StoreLockedError",
    "StoreVersionError",
    "StoreWriteError",
    "CrewConfigError",
    "ConfigFileError",
    "YamlInputError",
    "ExtraNotInstalledError",
    "UndeclaredPublishError",
    "LimitExceededError",
    "McpToolError",
    "RemoteAgentError",
    "RemoteAgentFailedError",
    "RemoteAgentTimeoutError",
    "RemoteAgentUnavailableError",
    "UnknownRemoteAgentError",
    "CrewFailedError",
    "CrewNotFoundError",
    "CrewStoppedError",
    "CrewWaitTimeoutError",
    "StoreCorruptError",
    "StoreDirectoryMissingError",
    "StoreNotWritableError",
    "BrokerError",
    "BrokerUnavailableError",
    "BrokerAccessError",
    "BrokerTlsError",
    "DeliveryNotConfirmedError",
    "BrokerNackError",
    "UnroutableError",
    "ExclusiveConsumerError",
    "SignatureError",
    "ToolDefinitionError",
    "ModelError",
    "ModelConfigError",
    "FleetControlError",
    "FleetTimeoutError",
    "IdempotencyKeyConflictError",
    "SentCoverageError",
    "SentHistoryUnavailableError",
]


class EventHubError(Exception):
    """Base class of every error raised by orkeon_actors."""


class InvalidArgumentError(EventHubError, ValueError):
    """An argument is out of its domain (a non-positive timeout, FOREVER on send, ...)."""


class LimitExceededError(InvalidArgumentError):
    """An input is over one of the runtime's bounds (``docs/security.md``): a payload, a
    topic, JSON nesting, metadata, or what one caller may hold at once (pending requests,
    waits, subscriptions). ``bound`` names the bound, ``limit`` is its value; nothing of
    the refused call was stored or routed."""

    def __init__(self, message: str, *, bound: str = "", limit: int = 0) -> None:
        super().__init__(message)
        self.bound = bound
        self.limit = limit


class InvalidIdError(InvalidArgumentError):
    """A crew, agent, message or correlation id is malformed."""


class InvalidMailboxAddressError(InvalidArgumentError):
    """A mailbox address does not follow one of the four schemes of spec §6.2."""


class MailboxNotFoundError(EventHubError, LookupError):
    """A post or send targeted a mailbox nobody registered, or one of a crew that has
    finished (``finished`` then says how: ``"completed"`` or ``"failed"``)."""

    def __init__(self, address: object, *, finished: str | None = None, detail: str | None = None) -> None:
        if finished is not None:
            text = (
                f"the mailbox {address} is gone: its crew has finished ({finished}) and nothing would read "
                "this message; start a new crew to handle it, or read the finished crew's outcome"
            )
        else:
            text = (
                f"no mailbox is registered at {address}: register it with "
                f"hub.register_mailbox({str(address)!r}) before posting to it, "
                "or check the address for a typo"
            )
        if detail is not None:
            text += f" ({detail})"
        super().__init__(text)
        self.address = address
        self.finished = finished


class LeaseRevokedError(MailboxNotFoundError):
    """A leased message could not be confirmed: its mailbox was closed while the lease
    was held, and the close handed the message back with the unconsumed ones."""

    def __init__(self, address: object, message_id: object) -> None:
        EventHubError.__init__(
            self,
            f"mailbox {address} was closed while message {message_id} was leased: its close returned the message "
            "with the unconsumed ones (a parked durable mailbox keeps it for its next reader), so it does not "
            "count as consumed here; do not act on it twice",
        )
        self.address = address
        self.finished = None
        self.message_id = message_id


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


class SchedulerFailedError(EventHubError):
    """The runtime's timer thread died, so no finite wait or send timeout can expire any
    more. Pending waits fail with it; stop the runtime and start a new one."""


class RateLimitedError(EventHubError):
    """A rate-limit stage refused a message; ``retry_after`` says in how many seconds a
    retry can succeed."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StoreError(EventHubError):
    """The durable store (``Runtime.start(store=...)``) could not do what was asked.

    ``path`` names the store file when the error is about one (else ``""``)."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class StoreCorruptError(StoreError):
    """The store file is damaged (truncated, garbled): restore a backup, or salvage it
    with ``sqlite3 PATH .recover``. Nothing was written to it."""


class StoreDirectoryMissingError(StoreError):
    """The directory of the store path does not exist: create it, or choose another path."""


class StoreNotWritableError(StoreError):
    """The store (or its directory) cannot be written: choose a writable path."""


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


class McpToolError(EventHubError):
    """A tool of an external MCP server failed: its result had ``isError: true``, the
    server answered with a protocol error, or the connection to it was lost.
    ``tool`` names the tool; the message carries the server's text."""

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool


class RemoteAgentError(EventHubError):
    """A call of an external A2A agent (``ask_agent``, a post to ``a2a://NAME``;
    ``docs/a2a-calling.md``) did not give an answer. ``agent`` names the agent as
    configured; ``task_id`` is the remote task, when one was created; ``state`` the
    remote task's last state (``failed``, ``rejected``, ``canceled``, ``auth-required``)
    when it reported one."""

    def __init__(
        self, message: str, *, agent: str | None = None, task_id: str | None = None, state: str | None = None
    ) -> None:
        super().__init__(message)
        self.agent = agent
        self.task_id = task_id
        self.state = state


class RemoteAgentUnavailableError(RemoteAgentError):
    """The remote agent could not be reached: its card could not be fetched or read,
    the connection failed, or it answered with a protocol error."""


class RemoteAgentFailedError(RemoteAgentError):
    """The remote agent reached a state that gives no answer: its task failed, was
    rejected or canceled, or needs authentication the runtime does not provide."""


class RemoteAgentTimeoutError(RemoteAgentError, TimeoutError):
    """The remote agent did not answer within the call's timeout; the runtime asked it to
    cancel the task (``tasks/cancel``)."""


class UnknownRemoteAgentError(RemoteAgentError, InvalidArgumentError):
    """No A2A agent is configured under this name: configure it with
    ``Runtime.start(a2a_agents={NAME: CARD_URL})``."""


class CrewNotFoundError(EventHubError, LookupError):
    """No crew with this id is running, asleep or finished (within its outcome's
    retention) under this supervisor: check the id, or spawn it first."""


class CrewStoppedError(CrewNotFoundError):
    """The crew actor you waited on (``orkeon_actors.crew.wait_finished(ref)``) is
    stopped, or stopped before its crew finished (``ref.stop()``, the runtime stopping,
    or its supervisor putting it to sleep): a supervised crew is waited for with
    ``sup.wait_finished(crew_id)``."""


class CrewFailedError(EventHubError):
    """The crew you waited for failed. ``crew_id`` names it, ``failure`` says why (its
    error type, message and the agent at fault), ``outcome`` is its full outcome."""

    def __init__(self, message: str, *, crew_id: str, failure: object, outcome: object) -> None:
        super().__init__(message)
        self.crew_id = crew_id
        self.failure = failure
        self.outcome = outcome


class CrewWaitTimeoutError(EventHubError, TimeoutError):
    """``wait_finished`` gave up: the crew had not finished within the timeout (it goes
    on running; wait again or stop it)."""


class BrokerError(EventHubError):
    """The message broker of the distributed hub (RabbitMQ) refused or could not take a
    message; the text says which and what to do."""


class BrokerUnavailableError(BrokerError):
    """The broker could not be reached (or did not confirm) within the call's bound."""


class BrokerAccessError(BrokerUnavailableError):
    """The broker definitively refused this login: a wrong password, a vhost that does
    not exist or that the login may not open, or ``ACCESS_REFUSED`` on a resource the
    login's permissions do not cover (the text names it). Retrying does not help."""


class BrokerTlsError(BrokerAccessError):
    """The TLS handshake with the broker failed for good (``amqps://``): its certificate
    is not signed by the URI's ``cafile`` or does not carry the name the URI connects to
    (``server_hostname``), or the broker refused this host's client certificate. The text
    carries the TLS library's own words. Retrying does not help."""


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


class DeliveryNotConfirmedError(BrokerError, TimeoutError):
    """A ``post(..., confirm_delivery=True)`` to a mailbox on another host got no
    DELIVERED receipt from the recipient's host within ``FleetConfig.delivery_timeout``
    (the broker did confirm it). The message is not withdrawn: it waits in the
    recipient's inbox and is delivered once that host consumes again. ``message_id``,
    ``recipient`` and ``host`` say which post, to whom, announced by which host."""

    def __init__(self, message: str, *, message_id: str, recipient: str, host: str | None) -> None:
        super().__init__(message)
        self.message_id = message_id
        self.recipient = recipient
        self.host = host


class CrewConfigError(InvalidArgumentError):
    """A crew document (YAML, a builder, a TypeScript crew emitted as JSON) does not
    match the canonical crew schema, or names something that does not exist (a model
    provider, a user tool). ``issues`` holds every problem found, each with its file,
    line, column, JSON pointer and what was expected
    (:class:`orkeon_actors.config.ConfigIssue`); the message lists them all."""

    def __init__(self, message: str, issues: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.issues = issues


class YamlInputError(InvalidArgumentError):
    """A YAML document was refused before anything was built from it
    (:mod:`orkeon_actors.guarded_yaml`, ``docs/security.md``): not UTF-8, not valid YAML
    (a duplicate key included), a tag, a list or mapping as a key, or over one of the
    loader's bounds. ``file``, ``line`` and ``column`` (1-based; 0 when unknown) say
    where; ``bound`` names the bound exceeded (``MAX_YAML_NODES``...) and ``limit`` its
    value, or are ``""`` and ``0``. The message never quotes the document's lines."""

    def __init__(
        self, message: str, *, file: str = "", line: int = 0, column: int = 0, bound: str = "", limit: int = 0
    ) -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.column = column
        self.bound = bound
        self.limit = limit


class ConfigFileError(InvalidArgumentError):
    """A configuration file was refused before it was read: not a regular file (a
    device, a FIFO, a directory), larger than its bound, unreadable, or (for a file a
    crew refers to) outside the crew file's directory. ``path`` is the path as given;
    nothing of the file's content is in the message."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class ExtraNotInstalledError(EventHubError, ImportError):
    """A command or suite needs an optional dependency that is not installed; the
    message names it and the ``orkeon-actors`` extra that installs it (``extra``)."""

    def __init__(self, message: str, *, extra: str = "") -> None:
        super().__init__(message)
        self.extra = extra


class UndeclaredPublishError(EventAclError):
    """A crew whose ``event.publish`` list is declared, with
    ``undeclared_publish: refuse``, published a topic the list does not declare."""


class IdempotencyKeyConflictError(EventHubError):
    """An ``idempotency_key`` was reused by the same sender for the same recipient with
    different content (sender-owned history, MESSAGE-R07). The first message stands;
    send the new content with a new key (or without one)."""

    def __init__(self, message: str, *, key: str = "", original_id: str = "") -> None:
        super().__init__(message)
        self.key = key
        self.original_id = original_id


class SentHistoryUnavailableError(EventHubError):
    """The sent history cannot be read or written here: the hub keeps none (an in-memory
    hub, or a store opened with ``sent_history=False``), or the caller is not an agent."""


class SentCoverageError(EventHubError):
    """A count was asked of a sent history whose coverage is not ``complete``
    (``unavailable``, or ``partial`` while sends are pending): a number would claim a
    completeness the index cannot prove (MESSAGE-R03). ``state`` and ``pending`` say why."""

    def __init__(self, message: str, *, state: str = "", pending: int = 0) -> None:
        super().__init__(message)
        self.state = state
        self.pending = pending
