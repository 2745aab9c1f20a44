"""The two autogen-core agents of the peer rows (imported only when autogen-core is
installed; see :mod:`orkeon_actors.bench.peer_autogen`).

No ``from __future__ import annotations`` here: autogen-core reads the handlers' type
hints at class creation to route messages by type."""

from dataclasses import dataclass

from autogen_core import MessageContext, RoutedAgent, message_handler

__all__ = ["Counter", "Ping", "Pong", "Responder"]


@dataclass
class Ping:
    n: int


@dataclass
class Pong:
    n: int


class Responder(RoutedAgent):  # type: ignore[misc, unused-ignore]  # Any without the bench extra
    """Answers every ``Ping`` with the ``Pong`` of the same number."""

    def __init__(self) -> None:
        super().__init__("answers every ping")

    @message_handler  # type: ignore[untyped-decorator, unused-ignore]
    async def on_ping(self, message: Ping, ctx: MessageContext) -> Pong:
        return Pong(message.n)


class Counter(RoutedAgent):  # type: ignore[misc, unused-ignore]
    """Counts the ``Ping`` messages it receives."""

    def __init__(self) -> None:
        super().__init__("counts what it receives")
        self.received = 0

    @message_handler  # type: ignore[untyped-decorator, unused-ignore]
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        self.received += 1
