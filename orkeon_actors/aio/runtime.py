"""``ok.aio.start``: a runtime for asyncio programs, and the awaitable crew supervisor.

::

    async with ok.aio.start(store="state.db") as rt:
        client = rt.bind("billing", "scorer")
        await client.publish("orders.created", {"id": 42})
        reply = await client.send("agent://fraud/checker", {"id": 42}, timeout=5)
        sup = await rt.start_supervisor(factories={"billing": build_billing})
        crew = await sup.spawn("billing")
        outcome = await sup.wait_finished(crew, timeout=60)

Starting and stopping the runtime (opening a store, stopping actors) run in the loop's
default executor, so the loop keeps serving other tasks meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from orkeon_actors.aio.client import AsyncHubClient
from orkeon_actors.errors import CrewWaitTimeoutError
from orkeon_actors.hub.port import EventHub
from orkeon_actors.model.ids import AgentId, CrewId
from orkeon_actors.runtime import Runtime

if TYPE_CHECKING:  # the crew layers load on first use: ``import orkeon_actors`` stays light
    from orkeon_actors.crew.snapshot import CrewOutcome
    from orkeon_actors.lifecycle.ports import LifecycleState, SleepReason
    from orkeon_actors.lifecycle.supervisor import CrewSupervisor

__all__ = ["AsyncCrewSupervisor", "AsyncRuntime", "start"]

T = TypeVar("T")


async def _in_executor(call: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, call)


class AsyncRuntime:
    """A running :class:`~orkeon_actors.runtime.Runtime` (``runtime``) seen from asyncio."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._supervisors: list[AsyncCrewSupervisor] = []

    @property
    def hub(self) -> EventHub:
        """The hub itself (its blocking API, for threads)."""
        return self.runtime.hub

    def bind(self, crew_id: CrewId | str, agent_id: AgentId | str | None = None) -> AsyncHubClient:
        """An awaitable client bound to ``crew_id`` (and ``agent_id``), as ``hub.bind``."""
        return AsyncHubClient(self.runtime.hub.bind(crew_id, agent_id))

    @property
    def system(self) -> AsyncHubClient:
        """The awaitable client bound to ``CrewId.SYSTEM`` (an unscoped observer)."""
        return AsyncHubClient(self.runtime.hub.system)

    async def start_supervisor(self, **options: Any) -> AsyncCrewSupervisor:
        """Start a :class:`~orkeon_actors.lifecycle.supervisor.CrewSupervisor` on this
        (durable) runtime with ``options`` (``factories=``, ``idle_timeout=``, ...);
        stopped by :meth:`stop` before the runtime. Raises ``InvalidArgumentError`` on
        an in-memory runtime."""
        from orkeon_actors.lifecycle.supervisor import CrewSupervisor

        supervisor = await _in_executor(lambda: CrewSupervisor.start(self.runtime, **options))
        wrapped = AsyncCrewSupervisor(supervisor)
        self._supervisors.append(wrapped)
        return wrapped

    async def stop(self) -> None:
        """Stop the supervisors started here (graceful: live crews sleep), then the
        runtime; idempotent. Pending waits raise ``HubStoppedError``."""
        supervisors, self._supervisors = self._supervisors, []
        for supervisor in supervisors:
            await supervisor.stop()
        await _in_executor(self.runtime.stop)

    async def __aenter__(self) -> AsyncRuntime:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class _Starting:
    """What :func:`start` returns: ``async with`` it, or ``await`` it."""

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options
        self._runtime: AsyncRuntime | None = None

    async def _start(self) -> AsyncRuntime:
        runtime = await _in_executor(lambda: Runtime.start(**self._options))
        return AsyncRuntime(runtime)

    def __await__(self) -> Any:
        return self._start().__await__()

    async def __aenter__(self) -> AsyncRuntime:
        self._runtime = await self._start()
        return self._runtime

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runtime is not None:
            await self._runtime.stop()


def start(**options: Any) -> _Starting:
    """Boot a runtime for asyncio: ``async with ok.aio.start(...) as rt`` (stopped on
    leaving the block) or ``rt = await ok.aio.start(...)`` (then ``await rt.stop()``).
    ``options`` are those of :meth:`Runtime.start` (``store=``, ``middleware=``,
    ``clock=``, ...), with the same errors."""
    return _Starting(options)


class AsyncCrewSupervisor:
    """A :class:`CrewSupervisor` (``supervisor``) seen from asyncio."""

    def __init__(self, supervisor: CrewSupervisor) -> None:
        self.supervisor = supervisor

    async def spawn(self, name: str, crew_id: CrewId | str | None = None) -> CrewId:
        """As :meth:`CrewSupervisor.spawn`."""
        return await _in_executor(lambda: self.supervisor.spawn(name, crew_id))

    async def sleep(self, crew_id: CrewId | str, reason: SleepReason | None = None) -> bool:
        """As :meth:`CrewSupervisor.sleep` (``reason`` defaults to ``EXPLICIT``)."""
        if reason is None:
            return await _in_executor(lambda: self.supervisor.sleep(crew_id))
        return await _in_executor(lambda: self.supervisor.sleep(crew_id, reason))

    async def wake(self, crew_id: CrewId | str) -> None:
        """As :meth:`CrewSupervisor.wake`."""
        await _in_executor(lambda: self.supervisor.wake(crew_id))

    async def state(self, crew_id: CrewId | str) -> LifecycleState:
        """As :meth:`CrewSupervisor.state`."""
        return await _in_executor(lambda: self.supervisor.state(crew_id))

    async def wait_finished(self, crew_id: CrewId | str, timeout: float | timedelta | None = None) -> CrewOutcome:
        """Await the outcome of ``crew_id``, holding no thread: the supervisor's
        :meth:`~CrewSupervisor.when_finished` callback hands it to the loop. As the
        blocking :meth:`CrewSupervisor.wait_finished`: the outcome of a completed crew,
        ``CrewFailedError`` for a failed one, ``CrewNotFoundError`` for a crew never
        spawned, and ``timeout`` (seconds or a ``timedelta``; ``None`` = no limit)
        passing raises ``CrewWaitTimeoutError`` (a ``TimeoutError``; the crew keeps
        running). Cancelling the task withdraws the callback."""
        from orkeon_actors.crew.finished import finish_timeout, settle_finished
        from orkeon_actors.lifecycle.finished import refuse_unknown

        seconds = finish_timeout(timeout)
        crew = CrewId(crew_id)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[CrewOutcome] = loop.create_future()
        told = threading.Event()

        def settle(outcome: CrewOutcome) -> None:
            if not future.done():
                future.set_result(outcome)

        def on_finished(outcome: CrewOutcome) -> None:  # the supervisor's thread: only schedule
            told.set()
            loop.call_soon_threadsafe(settle, outcome)

        withdraw = self.supervisor.when_finished(crew, on_finished)
        try:
            await _in_executor(lambda: refuse_unknown(self.supervisor, crew, told.is_set))
            async with asyncio.timeout(seconds):
                outcome = await future
        except TimeoutError:
            raise CrewWaitTimeoutError(
                f"crew {crew} did not finish within {seconds:g}s; it keeps running: wait again or give a longer timeout"
            ) from None
        finally:
            withdraw()
        return settle_finished(crew, outcome)

    async def stop(self, timeout: float = 30.0) -> None:
        """As :meth:`CrewSupervisor.stop` (graceful: live crews are put to sleep)."""
        await _in_executor(lambda: self.supervisor.stop(timeout))
