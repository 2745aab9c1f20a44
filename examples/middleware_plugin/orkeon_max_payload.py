"""A middleware stage packaged as a plugin: refuse payloads above a size limit.

Installed (``pip install examples/middleware_plugin``), it is found by name through the
``orkeon_actors.middleware`` entry point group: ``ok.Runtime.start(middleware=["max_payload"])``.
A stage is any object with ``on_publish(message, next)`` and ``on_receive(message, next)``.
"""

from __future__ import annotations

import orkeon_actors as ok
from orkeon_actors.errors import EventHubError
from orkeon_actors.middleware import Next, current_operation

__all__ = ["MaxPayload", "PayloadTooLargeError"]


class PayloadTooLargeError(EventHubError):
    """A payload was above the limit: say what was wrong and what to do next."""


class MaxPayload:
    """Refuses payloads above ``limit`` bytes on publish, post and send (never on reply:
    a responder must always be able to answer)."""

    def __init__(self, limit: int = 1_000) -> None:  # a plugin named in Runtime.start() gets no arguments
        self.limit = limit

    def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
        if current_operation() != "reply" and len(message.payload) > self.limit:
            raise PayloadTooLargeError(
                f"payload of {len(message.payload)} bytes exceeds {self.limit}; store it and send a reference"
            )
        return next(message)

    def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
        return next(message)  # nothing to check on the way in
