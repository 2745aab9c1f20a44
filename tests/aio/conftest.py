"""The contract suite through the asyncio facade.

``runtime`` / ``virtual_runtime`` here hand the contract tests a hub whose clients are
:class:`SyncOverAsync` adapters: every call a test makes (publish, post, send,
wait_for, subscription iteration and receive, ...) is an ``ok.aio`` coroutine run on
one event loop in its own thread, and the calling thread blocks on its result. The
contract tests run unchanged, so the facade shows every behaviour of the blocking API.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pytest

import orkeon_actors as ok
from orkeon_actors.aio import AsyncHubClient, AsyncSubscription

T = TypeVar("T")


class LoopThread:
    """One asyncio loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aio-contract-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class SyncSubscription:
    def __init__(self, subscription: AsyncSubscription, loop: LoopThread) -> None:
        self._async = subscription
        self._loop = loop

    def __iter__(self) -> SyncSubscription:
        return self

    def __next__(self) -> ok.Message:
        try:
            return self._loop.run(self._async.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def receive(self, timeout: Any, *, cancel: ok.CancelToken | None = None) -> ok.Message:
        return self._loop.run(self._async.receive(timeout, cancel=cancel))

    def __enter__(self) -> SyncSubscription:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._async.close()

    def __getattr__(self, name: str) -> Any:  # drain, poll, close, closed, dropped, ...
        return getattr(self._async.subscription, name)


class SyncOverAsync:
    """The blocking client API, each call an ``ok.aio`` coroutine on the loop."""

    def __init__(self, client: AsyncHubClient, loop: LoopThread) -> None:
        self._async = client
        self._loop = loop
        self.caller = client.client.caller
        self.hub = client.client.hub

    crew_id = property(lambda self: self._async.crew_id)
    agent_id = property(lambda self: self._async.agent_id)

    def publish(self, *args: Any, **kwargs: Any) -> ok.Message:
        return self._loop.run(self._async.publish(*args, **kwargs))

    def post(self, *args: Any, **kwargs: Any) -> ok.Message:
        return self._loop.run(self._async.post(*args, **kwargs))

    def send(self, *args: Any, **kwargs: Any) -> ok.Message:
        return self._loop.run(self._async.send(*args, **kwargs))

    def request(self, *args: Any, **kwargs: Any) -> ok.Message:
        return self._loop.run(self._async.request(*args, **kwargs))

    def reply(self, *args: Any, **kwargs: Any) -> ok.Message:
        return self._loop.run(self._async.reply(*args, **kwargs))

    def wait_for(self, *args: Any, **kwargs: Any) -> ok.Message:
        return self._loop.run(self._async.wait_for(*args, **kwargs))

    def get_last_value(self, *args: Any, **kwargs: Any) -> ok.Message | None:
        return self._loop.run(self._async.get_last_value(*args, **kwargs))

    def subscribe(self, *args: Any, **kwargs: Any) -> SyncSubscription:
        return SyncSubscription(self._async.subscribe(*args, **kwargs), self._loop)


class AioHub:
    """The hub, except that ``bind`` and ``system`` hand out facade-backed clients."""

    def __init__(self, hub: ok.EventHub, loop: LoopThread) -> None:
        self._hub = hub
        self._loop = loop

    def bind(self, crew_id: Any, agent_id: Any = None) -> SyncOverAsync:
        return SyncOverAsync(AsyncHubClient(self._hub.bind(crew_id, agent_id)), self._loop)

    @property
    def system(self) -> SyncOverAsync:
        return SyncOverAsync(AsyncHubClient(self._hub.system), self._loop)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hub, name)


_ADAPTERS = {
    "aio-memory": lambda tmp, clock: ok.Runtime.start(clock=clock),
    "aio-sqlite": lambda tmp, clock: ok.Runtime.start(store=str(tmp / "state.db"), clock=clock),
}


@pytest.fixture(params=sorted(_ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _through_aio(rt: ok.Runtime) -> Iterator[ok.Runtime]:
    loop = LoopThread()
    rt.hub = AioHub(rt.hub, loop)  # type: ignore[assignment]
    try:
        yield rt
    finally:
        rt.stop()
        loop.close()


@pytest.fixture
def runtime(adapter: str, tmp_path: Path) -> Iterator[ok.Runtime]:
    yield from _through_aio(_ADAPTERS[adapter](tmp_path, None))


@pytest.fixture
def virtual_runtime(adapter: str, tmp_path: Path) -> Iterator[tuple[ok.Runtime, ok.VirtualClock]]:
    clock = ok.VirtualClock()
    for rt in _through_aio(_ADAPTERS[adapter](tmp_path, clock)):
        yield rt, clock
