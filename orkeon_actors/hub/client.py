"""The caller-bound hub client: what users and agents hold.

Every method accepts plain strings where an id or an address is expected, numbers of
seconds or ``timedelta`` for timeouts, and an optional ``cancel=`` token. Blocking
calls return results and raise typed errors from :mod:`orkeon_actors.errors`.

The client is the crew boundary of every adapter: before the hub is reached it applies
the rules of :mod:`orkeon_actors.hub.boundary` (reserved topics, mailbox owners,
retained-value scopes) and the bounds of :mod:`orkeon_actors.model.limits` (payload
size, metadata, waits per caller), so nothing refused is stored or routed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Future, wait
from datetime import timedelta
from typing import TYPE_CHECKING

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.boundary import (
    bounded_payload,
    check_last_value_scope,
    check_mailbox_reader,
    check_metadata,
    check_publish_topic,
)
from orkeon_actors.hub.confirmation import confirming_delivery, delivery_confirmation_requested
from orkeon_actors.hub.port import CallerContext, EventHub, MailboxLease, Subscription

if TYPE_CHECKING:
    from orkeon_actors.history.endpoint import Endpoint
    from orkeon_actors.history.view import SentHistory
from orkeon_actors.model.address import MailboxAddress, Scheme, validate_topic, validate_topic_pattern
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId
from orkeon_actors.model.message import Message, freeze_metadata
from orkeon_actors.model.options import (
    DEFAULT_PUBLISH_OPTIONS,
    FiniteWaitTimeout,
    ForeverWaitTimeout,
    PublishOptions,
    WaitDescriptor,
    WaitOnMailbox,
    WaitOnReply,
    WaitOnTopic,
    WaitTimeout,
    coerce_wait_timeout,
    to_seconds,
)

__all__ = ["HubClient", "validate_wait_descriptor"]

Seconds = float | int | timedelta


_PLAIN_SECONDS = (int, float)
_INFINITY = float("inf")


def _send_timeout(timeout: Seconds | WaitTimeout) -> float:
    if isinstance(timeout, ForeverWaitTimeout):
        raise InvalidArgumentError(
            "send does not accept FOREVER (spec §9.3): a requester must not be suspended "
            "indefinitely; give a finite timeout in seconds"
        )
    if timeout is None:
        raise InvalidArgumentError("send requires a timeout (spec §9.3): give a positive number of seconds")
    if isinstance(timeout, FiniteWaitTimeout):
        return timeout.seconds
    return to_seconds(timeout)


def validate_wait_descriptor(descriptor: object) -> None:
    """Raise ``InvalidArgumentError`` unless ``descriptor`` is a wait descriptor."""
    if not isinstance(descriptor, (WaitOnTopic, WaitOnMailbox, WaitOnReply)):
        raise InvalidArgumentError(
            f"wait_for takes WaitOnTopic, WaitOnMailbox or WaitOnReply, got {type(descriptor).__name__}"
        )


PostItem = tuple[MailboxAddress | str, object] | tuple[MailboxAddress | str, object, Mapping[str, str] | None]
"""One post of :meth:`HubClient.post_many`: ``(to, payload)`` or ``(to, payload, metadata)``."""


class HubClient:
    """A hub handle bound to one caller (crew, optionally agent)."""

    __slots__ = ("caller", "hub")

    def __init__(self, hub: EventHub, caller: CallerContext) -> None:
        self.hub = hub
        self.caller = caller

    @property
    def crew_id(self) -> CrewId:
        return self.caller.crew_id

    @property
    def agent_id(self) -> AgentId | None:
        return self.caller.agent_id

    def publish(
        self,
        topic: str,
        payload: object = b"",
        options: PublishOptions | None = None,
        *,
        cancel: CancelToken | None = None,
    ) -> Message:
        """Broadcast ``payload`` on ``topic`` (global, or scoped by
        ``options.target_crew_id``). Returns the published message. Raises
        ``ReservedTopicError`` for a ``_system.`` topic (unless this is ``hub.system``),
        ``LimitExceededError`` for a payload, topic or metadata over its bound."""
        validate_topic(topic)
        check_publish_topic(self.caller, topic)
        options = options or DEFAULT_PUBLISH_OPTIONS
        check_metadata(options.metadata)
        return self.hub.publish(self.caller, topic, self._payload(payload), options, cancel)

    def post(
        self,
        to: MailboxAddress | str,
        payload: object = b"",
        metadata: Mapping[str, str] | None = None,
        *,
        cancel: CancelToken | None = None,
        idempotency_key: str | None = None,
        confirm_delivery: bool = False,
    ) -> Message:
        """Fire-and-forget to a mailbox. Raises ``MailboxNotFoundError`` if nobody
        registered it. Posting to ``topic://name`` publishes on ``name`` (a reserved
        ``_system.`` name raises ``ReservedTopicError``).

        ``idempotency_key`` (an agent on a durable store): reusing it for the same
        recipient with the same content returns the original message, after any crash,
        without posting again; with other content raises ``IdempotencyKeyConflictError``
        (docs/history.md). Without a key, identical posts are distinct posts.

        ``confirm_delivery=True``: to a mailbox on another host of a fleet, return only
        once that host holds the message (its DELIVERED receipt), or raise
        ``DeliveryNotConfirmedError`` after ``FleetConfig.delivery_timeout``
        (docs/distributed.md); on one host a post is held when it returns anyway. Not
        for a topic (no single recipient confirms it)."""
        address = MailboxAddress.parse(to)
        if address.scheme is Scheme.TOPIC:
            if confirm_delivery:
                raise InvalidArgumentError(
                    f"{to} is a topic: no single recipient confirms a broadcast; post to a mailbox, "
                    "or drop confirm_delivery"
                )
            check_publish_topic(self.caller, address.name or "")
        if metadata is not None:
            check_metadata(metadata)
        data = bounded_payload(payload, self.hub.limits)
        if confirm_delivery or delivery_confirmation_requested():
            with confirming_delivery(confirm_delivery):
                return self.hub.post(self.caller, address, data, metadata, cancel, idempotency_key=idempotency_key)
        # Neither asked here nor around this call: the context needs no change, and the
        # hot path skips the context manager (issue 31).
        return self.hub.post(self.caller, address, data, metadata, cancel, idempotency_key=idempotency_key)

    def post_nowait(
        self, to: MailboxAddress | str, payload: object = b"", metadata: Mapping[str, str] | None = None
    ) -> Future[Message]:
        """:meth:`post` without waiting for its commit: a pipelined post. The future
        completes with the message once it is kept (on a durable hub, at the group
        commit that wrote it) and handed to the mailbox live then, or fails with the
        error :meth:`post` would have raised from that point (``StoreWriteError``,
        ``HubStoppedError``, ``MailboxNotFoundError`` for a registration closed
        meanwhile). What is refused before anything is written (an unknown mailbox, a
        reserved topic, a middleware stage, the limits) raises here, at once.

        One thread can keep the writer's group commit full this way: posts queued
        back to back share transactions, while :meth:`post` waits for one commit per
        call. Posts from one thread are kept and handed over in call order. Callbacks
        added to the future run on the store's writer thread: keep them short and never
        wait for the store in them. Without a store (in memory) the post is done when
        this returns and the future is already complete."""
        address = MailboxAddress.parse(to)
        if address.scheme is Scheme.TOPIC:
            check_publish_topic(self.caller, address.name or "")
        check_metadata(metadata)
        return self.hub.post_nowait(self.caller, address, self._payload(payload), metadata)

    def post_many(
        self,
        posts: Iterable[tuple[MailboxAddress | str, object] | tuple[MailboxAddress | str, object, Mapping[str, str]]],
    ) -> list[Message]:
        """Post every ``(to, payload)`` or ``(to, payload, metadata)`` of ``posts``
        pipelined (:meth:`post_nowait`) and wait until all are committed; their
        messages, in order. A post refused before the write raises at once (the ones
        before it are posted); otherwise the first failed post's error is raised once
        every post has settled."""
        futures = [self.post_nowait(*post) for post in posts]
        wait(futures)
        return [future.result() for future in futures]

    def send(
        self,
        to: MailboxAddress | str,
        request: object,
        timeout: Seconds | WaitTimeout,
        metadata: Mapping[str, str] | None = None,
        *,
        cancel: CancelToken | None = None,
        idempotency_key: str | None = None,
        confirm_delivery: bool = False,
    ) -> Message:
        """Post ``request`` and block for its reply. ``timeout`` is mandatory and finite
        (``FOREVER`` raises ``InvalidArgumentError``); no reply in time raises
        ``SendTimeoutError`` (a ``TimeoutError``). With a reused ``idempotency_key``
        (see :meth:`post`) the original request stands and this waits for its reply.
        ``confirm_delivery=True`` (see :meth:`post`): a request to another host whose
        host does not confirm holding it raises ``DeliveryNotConfirmedError`` after
        ``FleetConfig.delivery_timeout`` instead of waiting the whole ``timeout``."""
        if type(timeout) in _PLAIN_SECONDS and 0 < timeout < _INFINITY:  # type: ignore[operator]
            seconds = float(timeout)  # type: ignore[arg-type]  # the common case, without two calls
        else:
            seconds = _send_timeout(timeout)
        if metadata is not None:
            check_metadata(metadata)
        address = to if type(to) is MailboxAddress else MailboxAddress.parse(to)
        data = bounded_payload(request, self.hub.limits)
        if confirm_delivery or delivery_confirmation_requested():
            with confirming_delivery(confirm_delivery):
                return self.hub.send(
                    self.caller, address, data, seconds, metadata, cancel, idempotency_key=idempotency_key
                )
        return self.hub.send(self.caller, address, data, seconds, metadata, cancel, idempotency_key=idempotency_key)

    def request(
        self,
        to: MailboxAddress | str,
        request: object,
        timeout: Seconds | WaitTimeout,
        metadata: Mapping[str, str] | None = None,
        *,
        cancel: CancelToken | None = None,
        idempotency_key: str | None = None,
        confirm_delivery: bool = False,
    ) -> Message:
        """Like :meth:`send` but returns at once with the request message; wait for the
        reply later with ``wait_for(WaitOnReply(msg.correlation_id), ...)``. The request
        stays answerable until ``timeout`` passes. ``idempotency_key`` and
        ``confirm_delivery`` (this returns once the recipient's host holds the request):
        see :meth:`post`."""
        seconds = _send_timeout(timeout)
        check_metadata(metadata)
        address = MailboxAddress.parse(to)
        with confirming_delivery(confirm_delivery):
            return self.hub.request(
                self.caller, address, self._payload(request), seconds, metadata, cancel, idempotency_key=idempotency_key
            )

    def reply(
        self,
        correlation_id: CorrelationId | str,
        payload: object = b"",
        metadata: Mapping[str, str] | None = None,
        *,
        cancel: CancelToken | None = None,
        idempotency_key: str | None = None,
    ) -> Message:
        """Answer a pending request. Raises ``UnknownCorrelationError`` when the id is
        unknown, already answered or expired, or the request went to another crew.
        ``idempotency_key``: see :meth:`post`."""
        if metadata is not None:
            check_metadata(metadata)
        return self.hub.reply(
            self.caller,
            correlation_id if type(correlation_id) is CorrelationId else CorrelationId(correlation_id),
            bounded_payload(payload, self.hub.limits),
            metadata,
            cancel,
            idempotency_key=idempotency_key,
        )

    # -- the sent history (docs/history.md) ---------------------------------------------

    def _sender(self) -> Endpoint:
        from orkeon_actors.errors import SentHistoryUnavailableError
        from orkeon_actors.history.endpoint import agent_endpoint

        if self.caller.agent_id is None or self.caller.is_system:
            raise SentHistoryUnavailableError(
                f"only agents own a sent history; this client is bound to crew {self.caller.crew_id} without an "
                "agent: use hub.bind(crew, agent)"
            )
        return agent_endpoint(self.caller.crew_id, self.caller.agent_id)

    def sent(
        self,
        to: MailboxAddress | str | None = None,
        since: int | None = None,
        include_body: bool = False,
    ) -> SentHistory:
        """What this agent sent (posts, sends, replies), oldest first, under its
        coverage: ``complete`` since a boundary, ``partial`` while sends are pending, or
        ``unavailable`` (a hub that keeps no history: never an empty complete list).
        ``to`` keeps one recipient; ``since`` (unix ms) keeps rows strictly after it;
        bodies only with ``include_body``. Reads the sender's own rows, never a mailbox."""
        if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
            raise InvalidArgumentError(f"since must be a non-negative int of unix milliseconds, got {since!r}")
        address = None if to is None else MailboxAddress.parse(to)
        return self.hub.sent_history(self._sender(), address, since, include_body)

    def sent_count(self, to: MailboxAddress | str | None = None, since: int | None = None) -> int:
        """How many rows :meth:`sent` holds; raises ``SentCoverageError`` unless the
        coverage is ``complete``."""
        return self.sent(to, since).count()

    def subscribe(
        self,
        topic: str,
        *,
        metadata_match: Mapping[str, str] | None = None,
        max_buffered: int | None = None,
        cancel: CancelToken | None = None,
    ) -> Subscription:
        """Subscribe to a topic pattern (``*`` one word, ``#`` zero or more).

        ``metadata_match`` keeps only messages whose metadata contains every given pair.
        ``max_buffered`` bounds the messages waiting to be consumed: beyond it the oldest
        are dropped and counted in ``subscription.dropped`` (default: unbounded).
        Raises ``InvalidArgumentError`` for a bad pattern, metadata or bound.
        """
        validate_topic_pattern(topic)
        if max_buffered is not None and (
            isinstance(max_buffered, bool) or not isinstance(max_buffered, int) or max_buffered < 1
        ):
            raise InvalidArgumentError(f"max_buffered must be a positive int or None, got {max_buffered!r}")
        match = freeze_metadata(metadata_match) if metadata_match else None
        return self.hub.subscribe(self.caller, topic, cancel, metadata_match=match, max_buffered=max_buffered)

    def wait_for(
        self,
        descriptor: WaitDescriptor,
        timeout: WaitTimeout | Seconds,
        *,
        cancel: CancelToken | None = None,
    ) -> Message:
        """Block for the next message matching ``descriptor``.

        A finite timeout that expires returns the WaitTimedOutMessage of spec §9.2
        (``message.is_timeout``); ``FOREVER`` blocks until a match or cancellation. A
        budget token that fires raises ``BudgetExhaustedError``.
        """
        validate_wait_descriptor(descriptor)
        if isinstance(descriptor, WaitOnMailbox):
            check_mailbox_reader(self.caller, descriptor.address, self.hub.client_mailbox_owner(descriptor.address))
        wait_timeout = coerce_wait_timeout(timeout)
        hub = self.hub
        release = hub.quotas.acquire("max_waits", hub.limits.max_waits, self.caller)
        try:
            return hub.wait_for(self.caller, descriptor, wait_timeout, cancel)
        finally:
            release()

    def lease(
        self,
        mailbox: MailboxAddress | str,
        timeout: WaitTimeout | Seconds,
        *,
        cancel: CancelToken | None = None,
    ) -> MailboxLease:
        """Take the next message of ``mailbox`` provisionally: the returned
        :class:`~orkeon_actors.hub.port.MailboxLease` holds it until ``confirm()``
        (consumed) or ``give_back()`` (back at the front of the mailbox, in order);
        meanwhile the mailbox hands nothing else out. Waits, times out, is cancelled
        and is refused as ``wait_for(WaitOnMailbox(mailbox), timeout)``; a timeout is a
        lease holding nothing whose ``message.is_timeout``. Use it as a context
        manager to give the message back on any exit without ``confirm()``."""
        address = MailboxAddress.parse(mailbox)
        check_mailbox_reader(self.caller, address, self.hub.client_mailbox_owner(address))
        wait_timeout = coerce_wait_timeout(timeout)
        hub = self.hub
        release = hub.quotas.acquire("max_waits", hub.limits.max_waits, self.caller)
        try:
            return hub.lease(self.caller, address, wait_timeout, cancel)
        finally:
            release()

    def get_last_value(
        self, key: str, crew_scope: CrewId | str | None = None, *, cancel: CancelToken | None = None
    ) -> Message | None:
        """The message retained under ``key`` (in ``crew_scope``'s slot, or the global
        slot when ``None``), or ``None`` if nothing was retained. A crew reads only the
        global slot and its own (``EventAclError`` for another crew's scope). A retained JSON
        ``null`` is a message whose ``json()`` is ``None``, not a ``None`` result."""
        if not isinstance(key, str) or not key:
            raise InvalidArgumentError("get_last_value needs a non-empty string key")
        scope = None if crew_scope is None else CrewId(crew_scope)
        check_last_value_scope(self.caller, scope)
        return self.hub.get_last_value(self.caller, key, scope, cancel)

    def _payload(self, payload: object) -> bytes:
        return bounded_payload(payload, self.hub.limits)

    def __repr__(self) -> str:
        agent = f", agent_id={self.caller.agent_id!s}" if self.caller.agent_id else ""
        return f"HubClient(crew_id={self.caller.crew_id!s}{agent})"
