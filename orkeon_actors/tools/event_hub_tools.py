"""``EventHubTools``: the seven agent tools bound to one agent's hub client (spec §5).

An LLM agent reaches the hub only through these tools::

    tools = ok.tools.EventHubTools(rt.hub.bind("billing", "scorer"))
    tools.definitions()                       # hand these to the model
    result = tools.invoke(call.name, call.arguments, errors="result")   # feed back to it

Python callers may also call the typed methods (``tools.publish_event({...})`` or with a
request DTO), which return response DTOs and raise typed errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Literal

from orkeon_actors.errors import (
    BudgetExhaustedError,
    CancelledError,
    EventHubError,
    HubStoppedError,
    InvalidArgumentError,
    MailboxAlreadyRegisteredError,
    ReservedTopicError,
    SendTimeoutError,
    ToolValidationError,
    UnknownCorrelationError,
)
from orkeon_actors.hub.client import HubClient
from orkeon_actors.hub.port import MailboxLease, MailboxRegistration
from orkeon_actors.model.address import RESERVED_TOPIC_PREFIX, MailboxAddress, Scheme, is_reserved_topic
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import (
    FiniteWaitTimeout,
    PublishOptions,
    WaitOnMailbox,
    WaitOnReply,
)
from orkeon_actors.tools.converter import structure_request, unstructure
from orkeon_actors.tools.cursors import DEFAULT_MAX_BUFFERED, DEFAULT_MAX_CURSORS, CursorKey, TopicCursors
from orkeon_actors.tools.definitions import TOOL_NAMES, spec_for, tool_definitions
from orkeon_actors.tools.dto import (
    GetLastValueRequest,
    GetLastValueResponse,
    PostMessageRequest,
    PostMessageResponse,
    PublishEventRequest,
    PublishEventResponse,
    ReceiveMessageRequest,
    ReceiveMessageResponse,
    ReplyToRequest,
    ReplyToResponse,
    SendRequestRequest,
    SendRequestResponse,
    WaitForEventRequest,
    WaitForEventResponse,
)
from orkeon_actors.tools.payload import decode_payload
from orkeon_actors.tools.styles import DefinitionStyle
from orkeon_actors.tools.validation import GLOBAL_SCOPE
from orkeon_actors.tools.waiting import (
    decode_arguments,
    error_result,
    field_of,
    receive_mailbox,
    receive_message_response,
    send_request_response,
    send_target,
    wait_for_event_response,
    wait_timeout,
)

__all__ = ["RESERVED_TOPIC_PREFIX", "ErrorMode", "EventHubTools", "tool_error_result"]

ErrorMode = Literal["raise", "result"]

_FATAL_ERRORS: Final = (CancelledError, BudgetExhaustedError, HubStoppedError)
"""Errors a model cannot fix by changing its call: they always propagate, so the agent
loop stops (a cancelled or out-of-budget agent must not keep calling tools)."""


class EventHubTools:
    """The seven tools of spec §5 for the agent (or crew) ``client`` is bound to.

    * ``client``: a :class:`~orkeon_actors.hub.client.HubClient` from ``hub.bind(crew,
      agent)``; every message the tools send carries its identity. ``hub.system`` is
      refused (``InvalidArgumentError``): the tools are an agent's view of the hub.
    * ``cancel``: a token (typically ``budget.token``) every blocking call honours unless
      a call passes its own. When it fires, the call raises its error
      (``CancelledError`` / ``BudgetExhaustedError``), even with ``errors="result"``.
    * ``register_own_mailbox``: the caller's mailbox (``agent://crew/agent``, or
      ``crew://crew`` for a crew-bound client) is registered at construction unless it
      already is, so others can post to the agent as soon as its tools exist. A mailbox
      registered here is unregistered by :meth:`close`; one registered by someone else is
      left to its owner. Pass ``False`` when the crew runtime owns the mailboxes.
    * ``max_cursors`` / ``max_buffered``: the memory bound of the ``wait_for_event`` loop
      (see :mod:`orkeon_actors.tools.cursors`).
    * ``own_mailbox``: the mailbox these tools read by default and may always read
      (default ``agent://crew/agent``, or ``crew://crew``); an external peer serving
      the tools (``orkeon mcp --client NAME``) passes its ``client://NAME``.

    Thread-safe: tool calls may run concurrently (parallel tool calls of a model), except
    two ``wait_for_event`` on the same topic and metadata_match, which would race for the
    same events (the second is refused).
    """

    def __init__(
        self,
        client: HubClient,
        *,
        cancel: CancelToken | None = None,
        register_own_mailbox: bool = True,
        max_cursors: int = DEFAULT_MAX_CURSORS,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        own_mailbox: MailboxAddress | str | None = None,
    ) -> None:
        if not isinstance(client, HubClient):
            raise TypeError(f"EventHubTools needs a HubClient from hub.bind(crew, agent), got {type(client).__name__}")
        if client.caller.is_system:
            raise InvalidArgumentError(
                "EventHubTools are an agent's view of the hub; bind a crew (and agent) with hub.bind(), not hub.system"
            )
        self.client = client
        self._cancel = cancel
        agent = client.agent_id
        self.own_mailbox: MailboxAddress = (
            MailboxAddress.parse(own_mailbox)
            if own_mailbox is not None
            else MailboxAddress.agent(client.crew_id, agent)
            if agent is not None
            else MailboxAddress.crew(client.crew_id)
        )
        if self.own_mailbox.scheme is Scheme.TOPIC:
            raise InvalidArgumentError(f"own_mailbox must be a mailbox, not the topic address {self.own_mailbox}")
        self._cursors = TopicCursors(client, max_cursors=max_cursors, max_buffered=max_buffered)
        self._registration: MailboxRegistration | None = None
        if register_own_mailbox:
            try:
                self._registration = _register_own(client, self.own_mailbox)
            except MailboxAlreadyRegisteredError:
                self._registration = None  # registered by its owner (the crew runtime): theirs to close
        self._handlers: dict[str, Callable[..., object]] = {
            "publish_event": self.publish_event,
            "post_message": self.post_message,
            "send_request": self.send_request,
            "reply_to": self.reply_to,
            "receive_message": self.receive_message,
            "wait_for_event": self.wait_for_event,
            "get_last_value": self.get_last_value,
        }

    # -- what a model is given ---------------------------------------------------------

    @staticmethod
    def definitions(style: DefinitionStyle = "anthropic") -> list[dict[str, Any]]:
        """The seven tool definitions (name, description, JSON Schema of the input), in
        the shape of ``style``: ``"anthropic"`` ``{name, description, input_schema}``
        (the default), ``"openai"``, ``"openai-strict"``, ``"gemini"`` or ``"mcp"`` (see
        :mod:`orkeon_actors.tools.styles`). Arguments a model sends for a lowered style
        (``openai-strict``, ``gemini``) go through
        :func:`~orkeon_actors.tools.styles.canonical_arguments` before :meth:`invoke`."""
        return tool_definitions(style)

    def invoke(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | bytes | None = None,
        *,
        errors: ErrorMode = "raise",
        cancel: CancelToken | None = None,
    ) -> dict[str, Any]:
        """Run the tool ``name`` with JSON ``arguments`` (a dict, or a JSON string as
        LLM APIs deliver them; ``None`` or ``""`` mean ``{}``) and return its result as a
        JSON-serialisable dict.

        With ``errors="raise"`` (default) a refused call raises ``ToolValidationError``
        or the typed hub error. With ``errors="result"`` it returns
        ``{"error": {"type", "message", "field"}}`` for the model to correct itself;
        cancellation, budget exhaustion and a stopped runtime still raise. Whatever
        ``name`` and ``arguments`` hold (a model's call is untrusted input), nothing else
        is raised in result mode: ``tests/security`` fuzzes this.
        """
        if errors not in ("raise", "result"):
            raise ValueError(f"errors must be 'raise' or 'result', got {errors!r}")
        try:
            if not isinstance(name, str) or spec_for(name) is None:
                raise ToolValidationError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
            return dict(unstructure(self._handlers[name](decode_arguments(arguments), cancel=cancel)))
        except EventHubError as exc:
            if errors == "raise" or isinstance(exc, _FATAL_ERRORS):
                raise
            return tool_error_result(name, exc)

    def invoke_leased(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | bytes | None = None,
        *,
        cancel: CancelToken | None = None,
    ) -> tuple[dict[str, Any], MailboxLease | None]:
        """:meth:`invoke` with ``errors="result"``, for a caller that delivers the result
        itself and must not lose a mailbox message it could not deliver (the MCP
        server): a ``receive_message`` result that carries a message comes with the
        :class:`~orkeon_actors.hub.port.MailboxLease` holding it, which the caller
        confirms once the result reached its reader, or gives back (the message is
        then first in its mailbox again). Every other result comes with ``None``."""
        if name != "receive_message":
            return self.invoke(name, arguments, errors="result", cancel=cancel), None
        try:
            req = structure_request(decode_arguments(arguments), ReceiveMessageRequest)
            mailbox = receive_mailbox(req, self.own_mailbox, self.client.crew_id)
            lease = self.client.lease(mailbox, wait_timeout(req), cancel=self._token(cancel))
        except EventHubError as exc:
            if isinstance(exc, _FATAL_ERRORS):
                raise
            return tool_error_result(name, exc), None
        try:
            result = dict(unstructure(receive_message_response(lease.message)))
        except BaseException:
            lease.give_back()
            raise
        return result, (lease if lease.held else None)

    # -- the seven tools ---------------------------------------------------------------

    def publish_event(
        self, request: PublishEventRequest | Mapping[str, Any], *, cancel: CancelToken | None = None
    ) -> PublishEventResponse:
        """Broadcast on a topic. Raises ``ReservedTopicError`` for a ``_system.`` topic
        before the hub is reached (spec §9.2), ``EventAclError`` when the ACL refuses a
        scoped publish."""
        req = structure_request(request, PublishEventRequest)
        _refuse_reserved(req.topic, "publish_event")
        options = PublishOptions(
            target_crew_id=req.target_crew_id,
            metadata=req.metadata,
            retain_as_last_value=bool(req.retain_as_last_value),
            last_value_key=req.last_value_key,
        )
        message = self.client.publish(req.topic, req.payload, options, cancel=self._token(cancel))
        return PublishEventResponse(message.id, message.published_at)

    def post_message(
        self, request: PostMessageRequest | Mapping[str, Any], *, cancel: CancelToken | None = None
    ) -> PostMessageResponse:
        """Fire-and-forget to a mailbox. Raises ``MailboxNotFoundError`` when nobody
        registered it, ``ReservedTopicError`` for ``topic://_system.*``."""
        req = structure_request(request, PostMessageRequest)
        if req.target_mailbox.scheme is Scheme.TOPIC:
            _refuse_reserved(req.target_mailbox.name or "", "post_message")
        message = self.client.post(
            req.target_mailbox,
            req.payload,
            req.metadata,
            cancel=self._token(cancel),
            idempotency_key=req.idempotency_key,
        )
        return PostMessageResponse(message.id, message.published_at)

    def send_request(
        self, request: SendRequestRequest | Mapping[str, Any], *, cancel: CancelToken | None = None
    ) -> SendRequestResponse:
        """Post a request and wait for its reply, at most ``timeout_ms``.

        The wait is the hub's (a registered reply waiter timed by its scheduler). No reply
        in time is a result, ``timed_out: true``, not an error. Raises
        ``MailboxNotFoundError`` for an unregistered mailbox.
        """
        req = structure_request(request, SendRequestRequest)
        target = send_target(req)
        token = self._token(cancel)
        seconds = req.timeout_ms / 1000
        sent = self.client.request(
            target, req.payload, seconds, req.metadata, cancel=token, idempotency_key=req.idempotency_key
        )
        correlation_id = sent.correlation_id
        assert correlation_id is not None  # the hub stamps every request with one
        outcome: Message | SendTimeoutError | UnknownCorrelationError
        try:
            outcome = self.client.wait_for(WaitOnReply(correlation_id), FiniteWaitTimeout(seconds), cancel=token)
        except (SendTimeoutError, UnknownCorrelationError) as exc:
            outcome = exc
        return send_request_response(correlation_id, outcome)

    def reply_to(
        self, request: ReplyToRequest | Mapping[str, Any], *, cancel: CancelToken | None = None
    ) -> ReplyToResponse:
        """Answer a pending request once. Raises ``UnknownCorrelationError`` when the
        correlation id is unknown, already answered or expired."""
        req = structure_request(request, ReplyToRequest)
        # The hub decides, with one error for every id this caller may not answer
        # (unknown, answered, expired, or a request another crew received).
        message = self.client.reply(
            req.correlation_id, req.payload, cancel=self._token(cancel), idempotency_key=req.idempotency_key
        )
        return ReplyToResponse(message.published_at)

    def receive_message(
        self, request: ReceiveMessageRequest | Mapping[str, Any], *, cancel: CancelToken | None = None
    ) -> ReceiveMessageResponse:
        """Take the oldest message of a mailbox of the caller's crew (default: its own),
        waiting for one. Raises ``ToolValidationError`` (field ``mailbox``) for a mailbox
        of another crew, a ``topic://`` or ``client://`` address (spec §10.3: reading is
        destructive, so only the owner reads), ``MailboxNotFoundError`` for an
        unregistered one."""
        req = structure_request(request, ReceiveMessageRequest)
        mailbox = receive_mailbox(req, self.own_mailbox, self.client.crew_id)
        message = self.client.wait_for(WaitOnMailbox(mailbox), wait_timeout(req), cancel=self._token(cancel))
        return receive_message_response(message)

    def wait_for_event(
        self, request: WaitForEventRequest | Mapping[str, Any], *, cancel: CancelToken | None = None
    ) -> WaitForEventResponse:
        """The next event on a topic pattern, through the agent's cursor for
        ``(topic, metadata_match)`` (see :mod:`orkeon_actors.tools.cursors`): events
        published between two calls are returned by the next calls, in order, once each."""
        req = structure_request(request, WaitForEventRequest)
        timeout = wait_timeout(req)
        cursor = self._cursors.acquire(req.topic, req.metadata_match)
        try:
            message = cursor.subscription.receive(timeout, cancel=self._token(cancel))
            missed = cursor.take_missed()
        finally:
            self._cursors.release(cursor)
        return wait_for_event_response(message, missed)

    def get_last_value(
        self, request: GetLastValueRequest | Mapping[str, Any], *, cancel: CancelToken | None = None
    ) -> GetLastValueResponse:
        """The value retained under ``key`` in ``crew_scope``'s slot (default: the
        caller's crew; ``"_global"``: the global slot)."""
        req = structure_request(request, GetLastValueRequest)
        if req.crew_scope is None:
            scope: CrewId | None = self.client.crew_id
        elif req.crew_scope == GLOBAL_SCOPE:
            scope = None
        else:
            scope = CrewId(req.crew_scope)
        message = self.client.get_last_value(req.key, scope, cancel=self._token(cancel))
        if message is None:
            return GetLastValueResponse(False, None, None)
        return GetLastValueResponse(True, decode_payload(message.payload)[0], message.published_at)

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def topic_cursors(self) -> TopicCursors:
        """The ``wait_for_event`` cursors themselves (a crew drives them for its agents)."""
        return self._cursors

    @property
    def cursors(self) -> list[CursorKey]:
        """The open ``wait_for_event`` cursors as ``(topic, metadata_match)``, least
        recently used first."""
        return self._cursors.keys()

    def close(self) -> list[Message]:
        """Close the cursors and unregister the mailbox these tools registered (if any).

        Returns the messages that mailbox still held, so none is dropped silently.
        Idempotent; the tools cannot wait for events afterwards.
        """
        self._cursors.close()
        registration, self._registration = self._registration, None
        return registration.close() if registration is not None else []

    def __enter__(self) -> EventHubTools:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventHubTools({self.own_mailbox!s})"

    def _token(self, cancel: CancelToken | None) -> CancelToken | None:
        return cancel if cancel is not None else self._cancel


def _refuse_reserved(topic: str, tool: str) -> None:
    if is_reserved_topic(topic):
        raise ReservedTopicError(
            f"{tool} cannot publish on {topic!r}: topics starting with {RESERVED_TOPIC_PREFIX!r} are reserved "
            "for messages the hub produces; choose another topic"
        )


def tool_error_result(tool: str, error: EventHubError) -> dict[str, Any]:
    """The ``{"error": {"type", "message", "field"}}`` result of a refused ``tool``
    call, as :meth:`EventHubTools.invoke` returns it with ``errors="result"``."""
    return error_result(error, field_of(tool, error))


def _register_own(client: HubClient, mailbox: MailboxAddress) -> MailboxRegistration:
    """Register the caller's own mailbox; a ``client://`` one with the caller's crew as
    its owner, so that it (and only it) may read it (spec §10.2.1)."""
    return client.hub.register_mailbox(mailbox, owner=client.crew_id if mailbox.scheme is Scheme.CLIENT else None)
