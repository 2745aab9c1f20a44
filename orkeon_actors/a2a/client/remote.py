"""``RemoteAgents``: a runtime's connections to the external A2A agents it may call.

Every call runs on the runtime's I/O loop (:class:`~orkeon_actors.actors.io_loop.IoLoop`,
``rt.agent_io.loop``) with the official SDK's async client (``a2a-sdk``): an agent whose
``ask_agent`` call is in flight is parked and holds no thread, whatever the remote agent
takes. Guarantees:

* one client per remote agent, made at its first call from its card (fetched once from
  ``{url}/.well-known/agent-card.json``, then cached); a card that cannot be fetched or
  read is :class:`~orkeon_actors.errors.RemoteAgentUnavailableError`, and the next call
  tries again;
* every call is bounded by its agent's ``timeout``: past it the remote task is cancelled
  (``tasks/cancel``) and the call fails with
  :class:`~orkeon_actors.errors.RemoteAgentTimeoutError`;
* cancelling a call's asyncio task (its crew stopped, its agent cancelled or out of
  budget) sends ``tasks/cancel`` for the remote task from a task of its own: at once if
  its id is known, else as soon as the agent's first event names it (bounded by the
  agent's timeout). A runtime that stops lets those still in flight finish for up to
  ``cancel_grace`` seconds, then abandons them, so a remote task whose id was not yet
  known may outlive a *runtime* stop;
* a streaming card is called with ``message/stream`` (each event handed to ``on_event``
  as it comes); otherwise ``message/send``, then ``tasks/get`` every
  ``poll_interval`` seconds until the task settles.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import AgentCard, CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest
from a2a.utils.errors import A2AError
from loguru import logger

from orkeon_actors.a2a.client.answers import TERMINAL, TaskProgress
from orkeon_actors.a2a.client.config import RemoteAgent
from orkeon_actors.actors.io_loop import IoLoop
from orkeon_actors.errors import (
    RemoteAgentFailedError,
    RemoteAgentTimeoutError,
    RemoteAgentUnavailableError,
    UnknownRemoteAgentError,
)

__all__ = ["EventSink", "RemoteAgents"]

EventSink = Callable[[dict[str, Any]], Awaitable[None]]
"""Called (awaited) with each event of a streaming call, as the model reads it."""


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark the outcome of an exchange nobody awaits any more (its caller was cancelled)
    as retrieved: the cancellation already reported what matters."""
    if not task.cancelled():
        task.exception()


class _Connection:
    """One remote agent's card and client (made on the I/O loop, used only there)."""

    def __init__(self, agent: RemoteAgent) -> None:
        self.agent = agent
        self.card: AgentCard | None = None
        self.client: Client | None = None
        self.http: httpx.AsyncClient | None = None
        self.lock = asyncio.Lock()

    async def open(self) -> Client:
        async with self.lock:
            if self.client is not None:
                return self.client
            agent = self.agent
            http = httpx.AsyncClient(headers=dict(agent.headers), timeout=agent.timeout)
            try:
                resolver = A2ACardResolver(http, agent.url)
                card = await resolver.get_agent_card(relative_card_path=agent.card_path)
                factory = ClientFactory(ClientConfig(streaming=agent.streaming, httpx_client=http))
                client = factory.create(card)
            except (A2AError, httpx.HTTPError, ValueError) as exc:
                await http.aclose()
                raise RemoteAgentUnavailableError(
                    f"cannot read the card of the A2A agent {agent.name!r} at {agent.url}: {exc}; check that it "
                    "runs and that the URL is the base URL of its /.well-known/agent-card.json",
                    agent=agent.name,
                ) from None
            self.card, self.client, self.http = card, client, http
            return client

    async def close(self) -> None:
        client, http = self.client, self.http
        self.client = self.http = None
        if client is not None:
            await client.close()
        if http is not None:
            await http.aclose()


class RemoteAgents:
    """The external A2A agents of one runtime (``rt.a2a_agents``), by name.

    ``agents``: the configured agents (:func:`~orkeon_actors.a2a.client.config.remote_agents`
    reads ``Runtime.start(a2a_agents=...)``); ``loop``: the runtime's I/O loop."""

    poll_interval = 0.2
    """Seconds between two ``tasks/get`` of a non-streaming call still working."""

    def __init__(self, agents: Mapping[str, RemoteAgent], loop: IoLoop) -> None:
        self.agents: dict[str, RemoteAgent] = dict(agents)
        self.loop = loop
        self._connections = {name: _Connection(agent) for name, agent in self.agents.items()}
        self._cancels: set[asyncio.Task[None]] = set()

    @property
    def names(self) -> tuple[str, ...]:
        """The configured names, in configuration order."""
        return tuple(self.agents)

    def agent(self, name: str) -> RemoteAgent:
        """The configuration of ``name``; ``UnknownRemoteAgentError`` if none."""
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(repr(n) for n in self.agents) or "none"
            raise UnknownRemoteAgentError(
                f"no A2A agent is configured as {name!r} (configured: {known}); configure it with "
                "Runtime.start(a2a_agents={NAME: CARD_URL})",
                agent=name,
            )
        return agent

    # -- cards ---------------------------------------------------------------------------

    async def acard(self, name: str) -> AgentCard:
        """The card of ``name`` (fetched at the first call, then cached)."""
        connection = self._connections[self.agent(name).name]
        await connection.open()
        assert connection.card is not None
        return connection.card

    def card(self, name: str) -> AgentCard:
        """:meth:`acard`, blocking its caller (never call it on the I/O loop)."""
        agent = self.agent(name)
        future = self.loop.submit(lambda: self.acard(name))
        try:
            return future.result(agent.timeout)
        except TimeoutError:
            future.cancel()
            raise RemoteAgentTimeoutError(
                f"the card of the A2A agent {name!r} did not come within {agent.timeout:g}s", agent=name
            ) from None

    # -- calls ---------------------------------------------------------------------------

    async def ask(
        self,
        name: str,
        text: str,
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        on_event: EventSink | None = None,
    ) -> dict[str, Any]:
        """Send ``text`` to ``name`` (continuing ``task_id`` when given: the answer to
        its ``input-required``) and return the outcome the model reads
        (:meth:`~orkeon_actors.a2a.client.answers.TaskProgress.outcome`). Raises the
        :class:`~orkeon_actors.errors.RemoteAgentError` s of the module docstring."""
        agent = self.agent(name)
        progress = TaskProgress(name, task_id)
        exchange = asyncio.get_running_loop().create_task(
            self._exchange(agent, progress, text, task_id, context_id, on_event)
        )
        exchange.add_done_callback(_retrieve)
        try:
            async with asyncio.timeout(agent.timeout):
                await asyncio.shield(exchange)  # cancelled: the exchange lives on until the task id is known
        except TimeoutError:
            self._cancel_remote(agent, progress, exchange)
            raise RemoteAgentTimeoutError(
                f"the A2A agent {name!r} did not answer within {agent.timeout:g}s (task {progress.task_id}, last "
                f"state {progress.state}); the task was cancelled: ask again later, or ask another agent",
                agent=name,
                task_id=progress.task_id,
                state=progress.state,
            ) from None
        except asyncio.CancelledError:
            self._cancel_remote(agent, progress, exchange)
            raise
        except A2AClientError as exc:
            raise RemoteAgentUnavailableError(
                f"the call of the A2A agent {name!r} failed in transport: {exc}; it may be down: try again later",
                agent=name,
                task_id=progress.task_id,
            ) from None
        except A2AError as exc:  # the agent answered with a protocol error
            raise RemoteAgentFailedError(
                f"the A2A agent {name!r} refused the request: {type(exc).__name__}: {exc}"
                + (f" (task {task_id}: continue only a task that is input-required)" if task_id else ""),
                agent=name,
                task_id=progress.task_id,
            ) from None
        except httpx.HTTPError as exc:
            raise RemoteAgentUnavailableError(
                f"cannot reach the A2A agent {name!r}: {exc}; it may be down: try again later", agent=name
            ) from None
        return progress.outcome()

    async def _exchange(
        self,
        agent: RemoteAgent,
        progress: TaskProgress,
        text: str,
        task_id: str | None,
        context_id: str | None,
        on_event: EventSink | None,
    ) -> None:
        """Send the message, read its events until the task settles, then poll
        ``tasks/get`` if it has not (a non-streaming answer of a task still working)."""
        client = await self._connections[agent.name].open()
        message = Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text=text)],
            task_id=task_id or "",
            context_id=context_id or "",
        )
        context = ClientCallContext(timeout=agent.timeout)
        stream = client.send_message(SendMessageRequest(message=message), context=context)
        try:
            async for response in stream:
                event = progress.add(response)
                if event is not None and on_event is not None:
                    await on_event(event)
                if progress.settled:
                    break
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        while not progress.settled:
            await asyncio.sleep(self.poll_interval)
            progress.add_task(await client.get_task(GetTaskRequest(id=progress.task_id or "")))

    def _cancel_remote(self, agent: RemoteAgent, progress: TaskProgress, exchange: asyncio.Task[None]) -> None:
        """In a task of its own (the caller is being cancelled or timed out): wait for
        the remote task's id if it is not known yet, stop reading, and send
        ``tasks/cancel`` unless the task already ended; bounded by the agent's timeout."""
        connection = self._connections[agent.name]

        async def cancel() -> None:
            try:
                async with asyncio.timeout(agent.timeout):
                    if progress.task_id is None and not exchange.done():
                        identified = asyncio.ensure_future(progress.identified.wait())
                        await asyncio.wait({identified, exchange}, return_when=asyncio.FIRST_COMPLETED)
                        identified.cancel()
                    exchange.cancel()
                    client = connection.client
                    if progress.task_id is None or progress.state in TERMINAL or client is None:
                        return
                    await client.cancel_task(CancelTaskRequest(id=progress.task_id))
            except (A2AError, httpx.HTTPError, TimeoutError) as exc:
                logger.warning(
                    "tasks/cancel of task {} of the A2A agent {!r} failed: {}", progress.task_id, agent.name, exc
                )

        task = asyncio.get_running_loop().create_task(cancel())
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    cancel_grace = 2.0
    """Seconds :meth:`aclose` lets the ``tasks/cancel`` still being sent finish before it
    closes the connections they travel on."""

    async def aclose(self) -> None:
        """Close every connection (on the I/O loop), once the ``tasks/cancel`` requests
        still in flight were sent or :attr:`cancel_grace` passed: a runtime stopped right
        after a call timed out or its crew stopped still cancels the remote task."""
        if self._cancels:
            _, late = await asyncio.wait(set(self._cancels), timeout=self.cancel_grace)
            for task in late:
                task.cancel()
        for connection in self._connections.values():
            await connection.close()

    def close(self) -> None:
        """Close every connection; a no-op once the loop stopped (its sockets went with it)."""
        if not self.loop.started:
            return
        future = self.loop.submit(self.aclose)
        try:
            future.result(5.0)
        except TimeoutError:
            future.cancel()
            logger.warning("closing the A2A agents' connections took more than 5 s; left to the loop's end")

    def __repr__(self) -> str:
        return f"RemoteAgents({list(self.agents)})"
