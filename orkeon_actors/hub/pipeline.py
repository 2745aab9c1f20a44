"""The middleware pipeline (spec §12): a chain of interceptors around delivery.

A stage implements :class:`EventHubMiddleware`::

    def on_publish(self, message, next): ...   # return next(message) to pass it on
    def on_receive(self, message, next): ...

Order is registration order on the publish path and the reverse on the receive path, so
a stage wraps a message symmetrically. A stage refuses by raising; the pipeline never
catches, so the refusal reaches the caller of publish/post/send/reply as that typed
error. A receive stage drops a message by raising ``DuplicateMessageError``, which the
hub catches at the delivery site.

Where stages run (§12.1): publish stages on publish, post, send and reply, in the
caller's thread; receive stages where a recipient consumes (subscription iteration,
topic wait, mailbox wait or held reader), in the consumer's thread. Neither costs an
actor hop. The requester's wait for its own reply does not cross the receive stages.

The operation in progress (``publish``, ``post``, ``send``, ``reply``, ``subscribe``,
``wait``, ``receive``) is readable by stages through :func:`current_operation`. With no
stage registered the pipeline is a direct call: a runtime without middleware pays nothing.

A stage may also define two optional hooks, called by the bootstrap (``Runtime.start`` /
``Runtime.stop``), never on the hot path:

* ``attach(context: MiddlewareContext) -> None``: the stage is wired to a running hub;
  the :class:`MiddlewareContext` gives it the hub, the runtime's clock and its schema
  registry. Called once, in registration order, before any traffic.
* ``detach() -> None``: the runtime stopped; release what ``attach`` took. Called in
  reverse order, after the hub stopped.

and two optional observers: ``on_wait_timed_out(message) -> None``, called (in the
scheduler's thread) with every WaitTimedOutMessage the hub emits, for hubs that expose
the ``on_wait_timed_out`` hook (the in-memory hub does); and ``on_given_back(message)
-> None``, called (in the consumer's thread) when a consumer that leased a mailbox
message gives it back unconsumed (``EventHub.lease``): its receive stages ran, and
will run again for the next reader, so a stage that remembers consumptions (the
idempotency stage) forgets this one.

The pipeline belongs to the hub (the hub composes it around delivery); the stages live
above it in :mod:`orkeon_actors.middleware` and :mod:`orkeon_actors.acl`. A stage given
to ``Runtime.start`` by name (a string) is resolved there, before the pipeline is built
(:func:`orkeon_actors.middleware.discovery.resolve_stages`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from orkeon_actors.model.clock import Clock
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.hub.port import EventHub
    from orkeon_actors.hub.schema_registry import EventSchemaRegistry

__all__ = [
    "EventHubMiddleware",
    "MiddlewareContext",
    "Next",
    "Pipeline",
    "current_operation",
    "PUBLISH_OPERATIONS",
    "RECEIVE_OPERATIONS",
]

Next = Callable[[Message], Message]

PUBLISH_OPERATIONS = ("publish", "post", "send", "reply")
RECEIVE_OPERATIONS = ("subscribe", "wait", "receive")

_operation: ContextVar[str] = ContextVar("orkeon_hub_operation", default="publish")


def current_operation() -> str:
    """The hub operation the running stage is part of: one of ``publish``, ``post``,
    ``send``, ``reply`` (publish path) or ``subscribe``, ``wait``, ``receive`` (receive
    path: subscription iteration, ``wait_for``, held mailbox reader)."""
    return _operation.get()


@runtime_checkable
class EventHubMiddleware(Protocol):
    """One stage of the chain. Both methods must call ``next`` exactly once to pass the
    message on (possibly a modified copy), or raise to refuse it."""

    def on_publish(self, message: Message, next: Next) -> Message: ...

    def on_receive(self, message: Message, next: Next) -> Message: ...


@attrs.frozen
class MiddlewareContext:
    """What a stage's ``attach`` hook receives: the runtime it now serves.

    * ``hub``: the running :class:`~orkeon_actors.hub.port.EventHub` (``pending_waits()``
      and the like; never call its traffic methods from a stage: that would recurse);
    * ``clock``: the runtime's :class:`~orkeon_actors.model.clock.Clock` (system or
      virtual), the only time source a stage should use for behaviour;
    * ``schema_registry``: the runtime's :class:`EventSchemaRegistry`.
    """

    hub: EventHub
    clock: Clock
    schema_registry: EventSchemaRegistry


def _identity(message: Message) -> Message:
    return message


def is_stage(candidate: object) -> bool:
    """True when ``candidate`` has callable ``on_publish`` and ``on_receive``."""
    return callable(getattr(candidate, "on_publish", None)) and callable(getattr(candidate, "on_receive", None))


class Pipeline:
    """The composed chain. Built once; running it allocates nothing per stage.

    ``stages`` are stage objects (names of installed plugins are resolved by the caller:
    :func:`orkeon_actors.middleware.discovery.resolve_stages`). Raises ``TypeError`` for
    an object that is not a stage.
    """

    def __init__(self, stages: Sequence[EventHubMiddleware] = ()) -> None:
        resolved: list[EventHubMiddleware] = []
        for stage in stages:
            if not is_stage(stage):
                raise TypeError(
                    f"middleware {stage!r} must define on_publish(message, next) and on_receive(message, next)"
                )
            resolved.append(stage)
        self.stages: tuple[EventHubMiddleware, ...] = tuple(resolved)
        self.empty = not self.stages
        self._attached: list[EventHubMiddleware] = []
        self._restore_hook: tuple[object, Callable[[Message], None] | None] | None = None

    def attach(self, context: MiddlewareContext) -> None:
        """Call every stage's optional ``attach(context)`` hook, in registration order,
        and route the hub's wait-timeout notifications to stages that observe them.

        If a hook raises, the stages already attached are detached again (reverse
        order) and the error propagates: the runtime does not start half-wired.
        """
        try:
            for stage in self.stages:
                hook = getattr(stage, "attach", None)
                if callable(hook):
                    hook(context)
                self._attached.append(stage)
        except BaseException:
            self.detach()
            raise
        observers = [
            observer for stage in self.stages if callable(observer := getattr(stage, "on_wait_timed_out", None))
        ]
        hub = context.hub
        if observers and hasattr(hub, "on_wait_timed_out"):
            previous: Callable[[Message], None] | None = getattr(hub, "on_wait_timed_out")  # noqa: B009

            def fan_out(message: Message) -> None:
                if previous is not None:
                    previous(message)
                for observer in observers:
                    observer(message)

            setattr(hub, "on_wait_timed_out", fan_out)  # noqa: B010
            self._restore_hook = (hub, previous)

    def detach(self) -> None:
        """Call every attached stage's optional ``detach()`` hook, in reverse order.

        Every hook runs even if an earlier one raised; the first error is then raised
        (the others are attached as its ``__notes__``). Idempotent."""
        if self._restore_hook is not None:
            hub, previous = self._restore_hook
            self._restore_hook = None
            setattr(hub, "on_wait_timed_out", previous)  # noqa: B010
        errors: list[BaseException] = []
        while self._attached:
            stage = self._attached.pop()
            hook = getattr(stage, "detach", None)
            if not callable(hook):
                continue
            try:
                hook()
            except Exception as exc:  # every stage gets detached; the first error is re-raised below
                errors.append(exc)
        if errors:
            first = errors[0]
            for other in errors[1:]:
                first.add_note(f"also failed to detach: {other!r}")
            raise first

    def given_back(self, message: Message) -> None:
        """Tell every stage with an ``on_given_back`` hook that ``message``, leased
        from a mailbox after its receive stages ran, went back to the mailbox unconsumed."""
        for stage in self.stages:
            hook = getattr(stage, "on_given_back", None)
            if callable(hook):
                hook(message)

    def publish_chain(self, operation: str, deliver: Next) -> Next:
        """Compose, once, the publish stages in registration order ending in ``deliver``.

        With no stage this returns ``deliver`` itself."""
        if self.empty:
            return deliver
        chain = deliver
        for stage in reversed(self.stages):
            chain = _bind(stage.on_publish, chain)
        return _with_operation(operation, chain)

    def receive_chain(self, operation: str) -> Next | None:
        """Compose, once, the receive stages in reverse registration order. The result
        returns what the consumer gets, or raises ``DuplicateMessageError`` to drop the
        message. ``None`` when there is no stage (the consumer takes the message as is).
        """
        if self.empty:
            return None
        chain: Next = _identity
        for stage in self.stages:
            chain = _bind(stage.on_receive, chain)
        return _with_operation(operation, chain)


def _with_operation(operation: str, chain: Next) -> Next:
    def run(message: Message) -> Message:
        token = _operation.set(operation)
        try:
            return chain(message)
        finally:
            _operation.reset(token)

    return run


def _bind(method: Callable[[Message, Next], Message], nxt: Next) -> Next:
    def step(message: Message) -> Message:
        return method(message, nxt)

    return step
