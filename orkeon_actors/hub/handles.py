"""The hub core's handles: what :class:`~orkeon_actors.hub.memory.HubCore` gives out
and keeps for its callers (a topic wait's router entry, a wait's registration, a
subscription, a mailbox's registration and its held reader).

Each handle keeps only its own buffer; every step that touches the hub's state (routing,
consumption through the receive stages, unregistering) is a call back into the core, so
the core's lock discipline stays in one module (:mod:`orkeon_actors.hub.memory`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import attrs

from orkeon_actors.errors import (
    EventHubError,
    HubStoppedError,
    InvalidArgumentError,
    MailboxNotFoundError,
)
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.hub.pipeline import Next
from orkeon_actors.hub.port import CallerContext, MailboxReader, MailboxRegistration, Subscription
from orkeon_actors.hub.routing import TopicRouter
from orkeon_actors.hub.scheduler import TimerHandle
from orkeon_actors.hub.waiter import BufferClosed, LocalBuffer, Waiter
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.ids import CrewId, new_ulid_str
from orkeon_actors.model.message import FrozenMap, Message
from orkeon_actors.model.options import ForeverWaitTimeout, WaitTimeout, coerce_wait_timeout

if TYPE_CHECKING:
    from orkeon_actors.hub.memory import HubCore

__all__ = ["MemoryReader", "MemoryRegistration", "MemorySubscription", "TopicWait", "WaitRegistration"]


class TopicWait:
    """A one-shot router entry: the first matching message settles the wait.
    :meth:`withdraw` takes it out of ``router`` (the wait's cleanup: a bound method, no
    closure, for each of 100,000 pending waits)."""

    __slots__ = ("crew_id", "metadata_match", "pattern", "router", "waiter")

    def __init__(
        self,
        pattern: str,
        crew_id: CrewId,
        metadata_match: FrozenMap | None,
        waiter: Waiter[Message],
        router: TopicRouter,
    ):
        self.pattern = pattern
        self.crew_id = crew_id
        self.metadata_match = metadata_match
        self.waiter = waiter
        self.router = router

    def offer(self, message: Message) -> None:
        self.waiter.try_complete(message)

    def withdraw(self) -> None:
        """Take this entry out of its router (idempotent)."""
        self.router.remove(self)


@attrs.frozen
class WaitRegistration:
    """Where a waiter was registered: its ``kind`` (``on_topic`` / ``on_mailbox`` /
    ``on_reply``), the ``original`` name reported by a timeout (§9.2), how to undo the
    registration, and how to start listening (reply waits only; a no-op otherwise)."""

    kind: str
    original: str
    cleanup: Callable[[], None]
    listen: Callable[[], None] = lambda: None


class MemorySubscription(Subscription):
    """The in-memory subscription: a local buffer fed by the router; shared with the
    non-blocking waits of :mod:`orkeon_actors.hub.async_wait`."""

    __slots__ = ("_buffer", "_hub", "_receive", "crew_id", "metadata_match", "on_close", "pattern")

    def __init__(
        self,
        hub: HubCore,
        pattern: str,
        crew_id: CrewId,
        receive: Next | None,
        metadata_match: FrozenMap | None = None,
        max_buffered: int | None = None,
    ) -> None:
        self.pattern = pattern
        self.crew_id = crew_id
        self.metadata_match: FrozenMap | None = metadata_match or None
        self._buffer: LocalBuffer[Message] = LocalBuffer(max_buffered)
        self._hub = hub
        self._receive = receive
        self.on_close: Callable[[], None] | None = None
        """Run by :meth:`close` (the caller's subscription quota is given back)."""

    def offer(self, message: Message) -> None:
        self._buffer.push(message)

    def __next__(self) -> Message:
        while True:
            try:
                message = self._buffer.take()
            except BufferClosed:
                raise StopIteration from None
            consumed = self._hub.consume(self._receive, message)
            if consumed is not None:
                return consumed

    def drain(self) -> list[Message]:
        out = []
        while (message := self._buffer.take_nowait()) is not None:
            consumed = self._hub.consume(self._receive, message)
            if consumed is not None:
                out.append(consumed)
        return out

    def poll(self) -> Message | None:
        while (message := self._buffer.take_nowait()) is not None:
            consumed = self._hub.consume(self._receive, message)
            if consumed is not None:
                return consumed
        return None

    def inject(self, message: Message) -> None:
        self._buffer.push(message)

    def pending(self) -> list[Message]:
        return self._buffer.peek_all()

    def receive(self, timeout: WaitTimeout | float | int | timedelta, *, cancel: CancelToken | None = None) -> Message:
        hub = self._hub
        wait_timeout = coerce_wait_timeout(timeout)
        if cancel is not None:
            cancel.raise_if_cancelled()
        clock = hub.clock
        deadline = None if isinstance(wait_timeout, ForeverWaitTimeout) else clock.monotonic() + wait_timeout.seconds
        wait_id = new_ulid_str()
        started_at = clock.now()
        while True:
            message = self._take_before(deadline, wait_id, started_at, cancel)
            if message.is_timeout:
                return message
            consumed = hub.consume(self._receive, message)
            if consumed is not None:
                return consumed

    def _take_before(
        self, deadline: float | None, wait_id: str, started_at: datetime, cancel: CancelToken | None
    ) -> Message:
        """The oldest buffered message, else block (a registered ``on_topic`` wait) for
        the next one, the timeout at ``deadline``, a cancellation or a close."""
        hub = self._hub
        waiter: Waiter[Message] = Waiter()
        try:
            message = self._buffer.take_or_park(waiter)
        except BufferClosed:
            raise self.closed_error() from None
        if message is not None:
            return message
        timer: TimerHandle | None = None
        if deadline is not None:
            caller = CallerContext(self.crew_id)
            timer = hub.scheduler.schedule_at(
                deadline, lambda: hub.expire_wait(waiter, caller, self.pattern, wait_id, started_at)
            )
        try:
            return hub.block(waiter, "on_topic", cancel)
        except BufferClosed:
            raise self.closed_error() from None
        finally:
            if timer is not None:
                timer.cancel()
            self._buffer.unpark(waiter)

    def closed_error(self) -> EventHubError:
        """The error a receive on this closed subscription raises."""
        if self._hub.stopped:
            return HubStoppedError("the runtime was stopped while waiting")
        return InvalidArgumentError(
            f"the subscription to {self.pattern!r} is closed; subscribe again to receive more messages"
        )

    @property
    def dropped(self) -> int:
        return self._buffer.dropped

    @property
    def hub(self) -> HubCore:
        return self._hub

    @property
    def buffer(self) -> LocalBuffer[Message]:
        """Where the router pushes this subscription's messages."""
        return self._buffer

    def close(self) -> None:
        self._hub.router.remove(self)
        self._buffer.close()
        self._hub.forget_subscription(self)
        if self.on_close is not None:
            self.on_close()

    @property
    def closed(self) -> bool:
        return self._buffer.closed

    def __repr__(self) -> str:
        return f"Subscription({self.pattern!r}, crew={self.crew_id!s}, buffered={len(self._buffer)})"


class MemoryReader(MailboxReader):
    def __init__(self, handle: MailboxHandle, hub: HubCore) -> None:
        self._handle = handle
        self._hub = hub
        self._buffer: LocalBuffer[Message] = LocalBuffer()
        handle.attach(self._buffer)

    def receive(self, cancel: CancelToken | None = None) -> Message:
        hub = self._hub
        if cancel is None and not hub.keeps_mailboxes:
            # The hot path of a held reader: nothing to acknowledge, nothing to cancel.
            while True:
                try:
                    message = self._buffer.take()
                except BufferClosed:
                    raise self._closed_error() from None
                receive = hub.receive_reader
                if receive is None:
                    return message
                consumed = hub.consume(receive, message)
                if consumed is not None:
                    return consumed
        hub.receiving(self._handle.address)
        unregister = cancel.on_cancel(self._buffer.interrupt) if cancel is not None else None
        try:
            while True:
                try:
                    message = self._buffer.take()
                except BufferClosed:
                    raise self._closed_error() from None
                consumed = hub.consume(hub.receive_reader, message)
                if consumed is not None:
                    return consumed
        finally:
            if unregister is not None:
                unregister()
                self._buffer.clear_interrupt()

    def _closed_error(self) -> MailboxNotFoundError | InvalidArgumentError:
        if self._handle.closed:
            return MailboxNotFoundError(self._handle.address)
        return InvalidArgumentError("this mailbox reader was closed; open a new one with reg.reader()")

    def __next__(self) -> Message:
        try:
            return self.receive()
        except (MailboxNotFoundError, InvalidArgumentError):
            raise StopIteration from None

    def close(self) -> None:
        self._handle.detach(self._buffer)
        self._hub.reader_closed(self._handle)


class MemoryRegistration(MailboxRegistration):
    __slots__ = ("_handle", "_hub", "address")

    def __init__(self, hub: HubCore, handle: MailboxHandle) -> None:
        self._hub = hub
        self._handle = handle
        self.address = handle.address

    def reader(self) -> MailboxReader:
        return MemoryReader(self._handle, self._hub)

    def depth(self) -> int:
        return self._handle.depth()

    @property
    def handle(self) -> MailboxHandle:
        return self._handle

    @property
    def hub(self) -> HubCore:
        return self._hub

    def close(self) -> list[Message]:
        return self._hub.unregister(self._handle)

    def __repr__(self) -> str:
        return f"MailboxRegistration({str(self.address)!r})"
