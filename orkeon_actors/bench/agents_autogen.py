"""autogen-core's side of ``orkeon bench agents`` (imported only when autogen-core is
installed; see :mod:`orkeon_actors.bench.agents_peers`).

No ``from __future__ import annotations`` here: autogen-core reads the handler's type
hints at class creation to route messages by type."""

import asyncio
from dataclasses import dataclass

from autogen_core import MessageContext, RoutedAgent, message_handler

__all__ = ["Ask", "Answer", "ModelCallingAgent"]


@dataclass
class Ask:
    n: int


@dataclass
class Answer:
    text: str


class ModelCallingAgent(RoutedAgent):  # type: ignore[misc, unused-ignore]  # Any without the bench extra
    """Answers an ``Ask`` after awaiting one model call of ``latency`` seconds."""

    def __init__(self, latency: float) -> None:
        super().__init__("calls its model once per ask")
        self.latency = latency

    @message_handler  # type: ignore[untyped-decorator, unused-ignore]
    async def on_ask(self, message: Ask, ctx: MessageContext) -> Answer:
        await asyncio.sleep(self.latency)
        return Answer("done")
