"""The one bridge from the hub's non-blocking waits to asyncio futures.

:func:`wait_future` and :func:`receive_future` register the wait with
:func:`~orkeon_actors.hub.async_wait.wait_async` / ``receive_async`` (the same router
entry, mailbox waiter, reply listener and scheduler timer a blocking ``wait_for``
uses) and return an :class:`asyncio.Future` that the hub's ``on_done`` callback settles
through ``loop.call_soon_threadsafe`` (in batches: one wake-up of the loop for every
outcome handed over before it ran). No thread is held while a task awaits it: the hub
thread that settles the wait (a publisher, a mailbox actor, the scheduler, a runtime
stop) only hands the outcome to the loop. :func:`await_wait` and
:func:`await_receive` are the same as coroutines.

The awaiting task's frame is the only one an error raised there passes through: a
runtime stop fails 100,000 awaited waits with a ``HubStoppedError`` each, whose
traceback holds that one frame (no bridge coroutine in between, no closure kept alive
by it; issue 31: stopping is then the hub's work and asyncio resuming each task, not
the garbage collector's).

Cancellation: cancelling the awaiting task cancels the future it awaits, and that
withdraws the wait in the hub at once (its waiter, timer and registration are removed,
a message it did not take stays where it was); the task sees
:class:`asyncio.CancelledError`. The caller's ``cancel=`` token is the wait's own: its
firing raises its error (``CancelledError``, ``BudgetExhaustedError``, a budget's
deadline included), as the blocking API does, and cancelling one task never fires it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import weakref
from collections import deque
from collections.abc import Callable

from loguru import logger

from orkeon_actors.hub.async_wait import AsyncWait, WaitOutcome, receive_async, wait_async
from orkeon_actors.hub.port import CallerContext, EventHub, Subscription
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import WaitDescriptor, WaitTimeout

__all__ = ["await_receive", "await_wait", "receive_future", "wait_future"]


class _WaitFuture(asyncio.Future[Message]):
    """The future of one awaited wait: :meth:`deliver` is the wait's ``on_done``;
    cancelling it (its task was cancelled, or ``asyncio.timeout`` / ``wait_for`` gave
    up) withdraws the wait in the hub before the task resumes."""

    __slots__ = ("_inbox", "outcome", "wait")

    def __init__(self, loop: asyncio.AbstractEventLoop, inbox: _LoopInbox) -> None:
        super().__init__(loop=loop)
        self._inbox = inbox
        self.outcome: WaitOutcome | None = None
        """What the hub handed over, until the loop settles this future with it."""
        self.wait: AsyncWait | None = None
        """The hub's wait until its outcome arrived (then ``None``: no cycle left)."""

    def deliver(self, outcome: WaitOutcome) -> None:
        """Any thread (the wait's ``on_done``): settle this future with ``outcome`` on
        its loop, soon."""
        self.outcome = outcome
        self._inbox.put(self)

    def cancel(self, msg: object | None = None) -> bool:
        wait, self.wait = self.wait, None
        if wait is not None and not self.done():
            wait.cancel()  # withdrawn: the hub hands it nothing more
        return super().cancel(msg)


_DRAIN_BATCH = 256
"""How many outcomes one turn of the loop settles before it lets the tasks they woke
run (the next turn settles the next ones)."""


class _LoopInbox:
    """Outcomes handed to one event loop by hub threads, settled there in batches: one
    ``call_soon_threadsafe`` (a wake-up of the loop) per batch, not per outcome, and no
    lock per outcome (a deque's append is atomic). A runtime stop settles every pending
    wait at once: with one wake-up each, the stopping thread and the loop traded the
    GIL once per wait, 75 s for 100,000 waits on a loaded machine.

    A turn of the loop settles at most :data:`_DRAIN_BATCH` futures, then schedules the
    next turn behind the tasks it woke: 100,000 outcomes never make 100,000 woken tasks
    wait in the loop's queue at once (each a handle the garbage collector would walk
    over and over, most of a stop's cost), and other callbacks run in between.

    No lost wake-up: ``_scheduled`` is up from the first outcome of a batch until a
    turn found the deque empty; that turn lowers it, then looks again, so an outcome
    appended meanwhile is drained by a turn it or :meth:`put` scheduled."""

    __slots__ = ("_items", "_lock", "_loop", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()  # only to raise _scheduled once per batch
        self._items: deque[_WaitFuture] = deque()
        self._scheduled = False

    def put(self, future: _WaitFuture) -> None:
        """Any thread: settle ``future`` with its ``outcome`` on the loop, soon."""
        self._items.append(future)
        if self._scheduled:  # a turn is scheduled and has not emptied the deque yet: it takes this one
            return
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop was closed: nobody can await this outcome any more
            logger.debug("asyncio loop closed before a wait settled: {!r} dropped", future.outcome)

    def _drain(self) -> None:
        """On the loop: settle the oldest outcomes handed over (a batch), in order."""
        items = self._items
        for _ in range(_DRAIN_BATCH):
            if not items:
                break
            future = items.popleft()
            outcome, future.outcome, future.wait = future.outcome, None, None
            if future.done():  # its task gave up on it
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)  # type: ignore[arg-type]  # a Message, never None here
        if not items:
            with self._lock:
                self._scheduled = False
            if not items:
                return
            with self._lock:  # appended after the look above, by a put that saw the flag still up
                if self._scheduled:
                    return
                self._scheduled = True
        self._loop.call_soon(self._drain)  # the rest on a later turn, behind the tasks just woken


_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopInbox] = weakref.WeakKeyDictionary()


def _inbox(loop: asyncio.AbstractEventLoop) -> _LoopInbox:
    """On ``loop``'s thread: its inbox (made on first use, freed with the loop)."""
    inbox = _inboxes.get(loop)
    if inbox is None:
        inbox = _inboxes[loop] = _LoopInbox(loop)
    return inbox


def _future(register: Callable[[Callable[[WaitOutcome], None]], AsyncWait]) -> asyncio.Future[Message]:
    """On the running loop: a future that ``register(on_done)`` (which registers the
    wait, or raises at once) settles."""
    loop = asyncio.get_running_loop()
    future = _WaitFuture(loop, _inbox(loop))
    future.wait = register(future.deliver)
    return future


def wait_future(
    hub: EventHub,
    caller: CallerContext,
    descriptor: WaitDescriptor,
    timeout: WaitTimeout,
    cancel: CancelToken | None,
) -> asyncio.Future[Message]:
    """Register, on the running loop's thread, a wait for the next message matching
    ``descriptor`` for ``caller``; the future to await: the message, the hub's
    ``WaitTimedOutMessage`` when a finite ``timeout`` expires, or the error a blocking
    ``wait_for`` raises (raised here at once for a stopped hub, a fired token, an
    unregistered mailbox or an unknown correlation). Cancelling the future withdraws
    the wait."""
    return _future(functools.partial(wait_async, hub, caller, descriptor, timeout, cancel))


def receive_future(
    hub: EventHub, subscription: Subscription, timeout: WaitTimeout, cancel: CancelToken | None
) -> asyncio.Future[Message]:
    """Register a wait for the next message of ``subscription`` (the oldest buffered
    one settles it at once); the future to await, settled as its blocking ``receive``
    would return or raise. Cancelling the future withdraws the wait (the message stays
    buffered)."""
    return _future(functools.partial(receive_async, hub, subscription, timeout, cancel))


async def await_wait(
    hub: EventHub,
    caller: CallerContext,
    descriptor: WaitDescriptor,
    timeout: WaitTimeout,
    cancel: CancelToken | None,
) -> Message:
    """:func:`wait_future`, awaited."""
    return await wait_future(hub, caller, descriptor, timeout, cancel)


async def await_receive(
    hub: EventHub, subscription: Subscription, timeout: WaitTimeout, cancel: CancelToken | None
) -> Message:
    """:func:`receive_future`, awaited."""
    return await receive_future(hub, subscription, timeout, cancel)
