"""``AsyncHubClient``: the caller-bound hub client, awaitable.

The same calls as :class:`~orkeon_actors.hub.client.HubClient`, with the same
arguments, results and typed errors; the waits (``wait_for``, ``send``'s reply, a
subscription's next message) are awaited without holding a thread (see
:mod:`orkeon_actors.aio.awaiting`). Calls that do not wait (``publish``, ``post``,
``reply``, ``get_last_value``, ``request``) run inline on an in-memory hub, where they
never block; on a durable hub they wait for the store's commit, so they run in the
loop's default executor instead of stalling the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TypeVar

from orkeon_actors.aio.awaiting import receive_future, wait_future
from orkeon_actors.hub.async_wait import forget_request
from orkeon_actors.hub.client import HubClient, Seconds, validate_wait_descriptor
from orkeon_actors.hub.port import Subscription
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import (
    FOREVER,
    PublishOptions,
    WaitDescriptor,
    WaitOnReply,
    WaitTimeout,
    coerce_wait_timeout,
)

__all__ = ["AsyncHubClient", "AsyncSubscription"]

T = TypeVar("T")


class AsyncHubClient:
    """An awaitable hub handle bound to one caller; wraps ``client`` (from
    ``hub.bind(crew, agent)``), which stays usable from threads."""

    __slots__ = ("_inline", "client")

    def __init__(self, client: HubClient) -> None:
        if not isinstance(client, HubClient):
            raise TypeError(f"AsyncHubClient wraps a HubClient from hub.bind(), got {type(client).__name__}")
        self.client = client
        from orkeon_actors.store import SqliteEventHub

        self._inline = not isinstance(client.hub, SqliteEventHub)

    @property
    def crew_id(self) -> CrewId:
        return self.client.crew_id

    @property
    def agent_id(self) -> AgentId | None:
        return self.client.agent_id

    async def _run(self, call: Callable[[], T]) -> T:
        if self._inline:
            return call()
        return await asyncio.get_running_loop().run_in_executor(None, call)

    async def publish(
        self,
        topic: str,
        payload: object = b"",
        options: PublishOptions | None = None,
        *,
        cancel: CancelToken | None = None,
    ) -> Message:
        """As :meth:`HubClient.publish`."""
        return await self._run(lambda: self.client.publish(topic, payload, options, cancel=cancel))

    async def post(
        self,
        to: MailboxAddress | str,
        payload: object = b"",
        metadata: Mapping[str, str] | None = None,
        *,
        cancel: CancelToken | None = None,
        idempotency_key: str | None = None,
        confirm_delivery: bool = False,
    ) -> Message:
        """As :meth:`HubClient.post`."""
        return await self._run(
            lambda: self.client.post(
                to, payload, metadata, cancel=cancel, idempotency_key=idempotency_key, confirm_delivery=confirm_delivery
            )
        )

    async def request(
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
        """As :meth:`HubClient.request`: the request message, at once."""
        return await self._run(
            lambda: self.client.request(
                to,
                request,
                timeout,
                metadata,
                cancel=cancel,
                idempotency_key=idempotency_key,
                confirm_delivery=confirm_delivery,
            )
        )

    async def send(
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
        """Post ``request`` and await its reply, as :meth:`HubClient.send`: ``timeout``
        is mandatory and finite (``FOREVER`` raises ``InvalidArgumentError``); no reply
        in time raises ``SendTimeoutError``. Cancelling the task (or ``cancel`` firing)
        withdraws the request: a late reply is refused with ``UnknownCorrelationError``."""
        sent = await self.request(
            to,
            request,
            timeout,
            metadata,
            cancel=cancel,
            idempotency_key=idempotency_key,
            confirm_delivery=confirm_delivery,
        )
        correlation_id = sent.correlation_id
        assert correlation_id is not None  # the hub stamps every request with one
        hub = self.client.hub
        try:  # the request's own deadline fails this wait with SendTimeoutError
            return await wait_future(hub, self.client.caller, WaitOnReply(correlation_id), FOREVER, cancel)
        finally:  # as the blocking send: once the requester stops waiting, a reply is refused
            forget_request(hub, correlation_id)

    async def reply(
        self,
        correlation_id: CorrelationId | str,
        payload: object = b"",
        metadata: Mapping[str, str] | None = None,
        *,
        cancel: CancelToken | None = None,
        idempotency_key: str | None = None,
    ) -> Message:
        """As :meth:`HubClient.reply`."""
        return await self._run(
            lambda: self.client.reply(correlation_id, payload, metadata, cancel=cancel, idempotency_key=idempotency_key)
        )

    async def wait_for(
        self,
        descriptor: WaitDescriptor,
        timeout: WaitTimeout | Seconds,
        *,
        cancel: CancelToken | None = None,
    ) -> Message:
        """Await the next message matching ``descriptor``, as :meth:`HubClient.wait_for`:
        a finite timeout that expires returns the ``WaitTimedOutMessage``
        (``message.is_timeout``); ``cancel`` firing raises its error
        (``CancelledError``, ``BudgetExhaustedError``); cancelling the task raises
        :class:`asyncio.CancelledError` and withdraws the wait."""
        validate_wait_descriptor(descriptor)
        wait_timeout = coerce_wait_timeout(timeout)
        return await wait_future(self.client.hub, self.client.caller, descriptor, wait_timeout, cancel)

    def subscribe(
        self,
        topic: str,
        *,
        metadata_match: Mapping[str, str] | None = None,
        max_buffered: int | None = None,
        cancel: CancelToken | None = None,
    ) -> AsyncSubscription:
        """Subscribe to a topic pattern, as :meth:`HubClient.subscribe` (registered
        before this returns: every later matching message is seen, once each)."""
        subscription = self.client.subscribe(
            topic, metadata_match=metadata_match, max_buffered=max_buffered, cancel=cancel
        )
        return AsyncSubscription(self.client, subscription)

    async def get_last_value(
        self, key: str, crew_scope: CrewId | str | None = None, *, cancel: CancelToken | None = None
    ) -> Message | None:
        """As :meth:`HubClient.get_last_value`."""
        return await self._run(lambda: self.client.get_last_value(key, crew_scope, cancel=cancel))

    def __repr__(self) -> str:
        return f"Async{self.client!r}"


class AsyncSubscription:
    """An async iterator of the messages of one subscription, FIFO, each once.

    ``async for m in sub`` ends cleanly (``StopAsyncIteration``) after :meth:`close`,
    once the ``cancel`` token given to ``subscribe`` fires, or when the runtime stops.
    Cancelling the iterating task leaves the next message buffered. Also an (async)
    context manager that closes the subscription.
    """

    __slots__ = ("_client", "subscription")

    def __init__(self, client: HubClient, subscription: Subscription) -> None:
        self._client = client
        self.subscription = subscription

    @property
    def pattern(self) -> str:
        return self.subscription.pattern

    async def receive(self, timeout: WaitTimeout | Seconds, *, cancel: CancelToken | None = None) -> Message:
        """Await the next message, as the blocking ``Subscription.receive``: the oldest
        buffered one at once, the ``WaitTimedOutMessage`` when a finite timeout expires
        (the subscription stays open, nothing is lost), ``InvalidArgumentError`` once
        closed."""
        return await receive_future(self._client.hub, self.subscription, coerce_wait_timeout(timeout), cancel)

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> Message:
        try:
            return await receive_future(self._client.hub, self.subscription, FOREVER, None)
        except Exception:
            if self.subscription.closed:
                raise StopAsyncIteration from None
            raise

    def close(self) -> None:
        """Stop receiving; idempotent. A task awaiting the next message ends its
        iteration."""
        self.subscription.close()

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
