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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

from orkeon_actors.model.message import Message

__all__ = [
    "EventHubMiddleware",
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


def _identity(message: Message) -> Message:
    return message


class Pipeline:
    """The composed chain. Built once; running it allocates nothing per stage."""

    def __init__(self, stages: Sequence[EventHubMiddleware] = ()) -> None:
        self.stages: tuple[EventHubMiddleware, ...] = tuple(stages)
        for stage in self.stages:
            if not (callable(getattr(stage, "on_publish", None)) and callable(getattr(stage, "on_receive", None))):
                raise TypeError(
                    f"middleware {stage!r} must define on_publish(message, next) and on_receive(message, next)"
                )
        self.empty = not self.stages

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
