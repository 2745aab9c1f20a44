"""The peers' side of ``orkeon bench agents``: the same work (N agents, one model call of
``L`` seconds each, the call being ``await asyncio.sleep(L)``) written as each peer's
users write it, each run in a fresh process by :mod:`orkeon_actors.bench.agents_work`.

* ``autogen``: autogen-core 0.7.5's ``SingleThreadedAgentRuntime``, one ``RoutedAgent``
  per agent id, N ``send_message`` calls awaited together.
* ``langgraph``: one LangGraph graph fanning out to N ``Send`` branches of an async node.
* ``maf``: the Microsoft Agent Framework (``agent-framework``), N ``Agent.run`` calls
  awaited together, each agent on a chat client whose ``get_response`` awaits the call.

Each function returns ``(wall seconds, peak threads, extra figures)``; the wall runs from
the first message to the last answer (creating the agents' definitions is not timed).
:func:`unavailable` names the peers that cannot run here and why.
"""

from __future__ import annotations

import asyncio
import importlib.util
import operator
import time
from collections.abc import Callable
from typing import Annotated, Any, Final, TypedDict

from orkeon_actors.bench.agents_work import ANSWER, ThreadPeak

__all__ = ["PEERS", "PEER_PACKAGES", "unavailable"]

PEER_PACKAGES: Final = {"autogen": "autogen_core", "langgraph": "langgraph", "maf": "agent_framework"}
"""Each peer's importable package (all in the ``bench`` extra)."""


def unavailable() -> dict[str, str]:
    """``{peer: why it cannot run}`` for each peer whose package is not installed."""
    return {
        peer: f"{package} is not installed (pip install -e '.[bench]')"
        for peer, package in PEER_PACKAGES.items()
        if importlib.util.find_spec(package) is None
    }


# -- autogen-core ----------------------------------------------------------------------


def _autogen(n: int, latency: float) -> tuple[float, int, dict[str, Any]]:
    from autogen_core import AgentId, SingleThreadedAgentRuntime

    from orkeon_actors.bench.agents_autogen import Ask, ModelCallingAgent

    async def run() -> float:
        runtime = SingleThreadedAgentRuntime()
        await ModelCallingAgent.register(runtime, "agent", lambda: ModelCallingAgent(latency))
        runtime.start()
        started = time.perf_counter()
        answers = await asyncio.gather(*(runtime.send_message(Ask(i), AgentId("agent", str(i))) for i in range(n)))
        wall = time.perf_counter() - started
        await runtime.stop()
        if any(answer.text != ANSWER for answer in answers):
            raise RuntimeError("an autogen-core agent gave another answer")
        return wall

    with ThreadPeak() as threads:
        wall = asyncio.run(run())
    return wall, threads.peak, {}


# -- LangGraph -------------------------------------------------------------------------


class _FanOut(TypedDict):
    n: int
    answers: Annotated[list[str], operator.add]


def _langgraph(n: int, latency: float) -> tuple[float, int, dict[str, Any]]:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    async def agent(state: Any) -> dict[str, Any]:  # a Send's payload, not the graph's state
        await asyncio.sleep(latency)
        return {"answers": [ANSWER]}

    def fan_out(state: _FanOut) -> list[Any]:  # Send objects (hints read at run time: no local names)
        return [Send("agent", {"i": i}) for i in range(state["n"])]

    graph = StateGraph(_FanOut)
    graph.add_node("agent", agent)
    graph.add_conditional_edges(START, fan_out, ["agent"])
    graph.add_edge("agent", END)
    app = graph.compile()

    async def run() -> float:
        started = time.perf_counter()
        result = await app.ainvoke({"n": n, "answers": []})
        wall = time.perf_counter() - started
        if len(result["answers"]) != n:
            raise RuntimeError(f"LangGraph gave {len(result['answers'])} answers for {n} branches")
        return wall

    with ThreadPeak() as threads:
        wall = asyncio.run(run())
    return wall, threads.peak, {}


# -- the Microsoft Agent Framework ------------------------------------------------------


class _AwaitingChatClient:
    """A chat client (``agent_framework.SupportsChatGetResponse``, the framework's public
    protocol) whose call awaits ``asyncio.sleep(latency)`` and answers."""

    additional_properties: dict[str, Any]

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.additional_properties = {}

    def get_response(self, messages: Any, *, stream: bool = False, options: Any = None, **kwargs: Any) -> Any:
        from agent_framework import ChatResponse, Message

        async def answer() -> Any:
            await asyncio.sleep(self.latency)
            return ChatResponse(messages=[Message("assistant", [ANSWER])])

        return answer()


def _maf(n: int, latency: float) -> tuple[float, int, dict[str, Any]]:
    from agent_framework import Agent

    agents = [Agent(_AwaitingChatClient(latency), name=f"agent{i}") for i in range(n)]

    async def run() -> float:
        started = time.perf_counter()
        answers = await asyncio.gather(*(agent.run("go") for agent in agents))
        wall = time.perf_counter() - started
        if any(answer.text != ANSWER for answer in answers):
            raise RuntimeError("an Agent Framework agent gave another answer")
        return wall

    with ThreadPeak() as threads:
        wall = asyncio.run(run())
    return wall, threads.peak, {}


PEERS: Final[dict[str, Callable[[int, float], tuple[float, int, dict[str, Any]]]]] = {
    "autogen": _autogen,
    "langgraph": _langgraph,
    "maf": _maf,
}
"""Each peer's workload, by the name ``agents_work`` runs it under."""
