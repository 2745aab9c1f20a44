"""Shared fixtures.

``runtime`` / ``hub`` are parametrised over every adapter of the EventHub port listed in
``ADAPTERS``: the contract suite in ``tests/contract`` runs unchanged on each of them.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from loguru import logger

import orkeon_actors as ok
from orkeon_actors.testing import wait_until

__all__ = ["ADAPTERS", "Background", "wait_until"]

logger.enable("orkeon_actors")  # the library is silent by default; tests observe its records


@pytest.fixture(autouse=True)
def _runtime_records_stay_on() -> Iterator[None]:
    """A test that turned the runtime's records off (``ok.disable_logging()``) does not
    silence them for the tests after it, which watch them through their own sinks."""
    yield
    logger.enable("orkeon_actors")


ADAPTERS: dict[str, Callable[[Path, ok.Clock | None], ok.Runtime]] = {
    "memory": lambda tmp, clock: ok.Runtime.start(clock=clock),
    "sqlite": lambda tmp, clock: ok.Runtime.start(store=str(tmp / "state.db"), clock=clock),
    "studio": lambda tmp, clock: _watched(ok.Runtime.start(clock=clock, studio=0)),
    "amqp": lambda tmp, clock: _amqp_runtime(tmp, clock),
}


def _amqp_runtime(tmp: Path, clock: ok.Clock | None) -> ok.Runtime:
    """A host of a fleet on the real RabbitMQ (skipped without one, except under CI=true)."""
    from tests.amqp.fleet import amqp_runtime

    return amqp_runtime(tmp, clock)


def _watched(rt: ok.Runtime) -> ok.Runtime:
    """The in-memory hub with the Studio's tap first in the chain and a browser attached,
    so every message takes the tap's full path: the contract must hold unchanged."""
    assert rt.studio is not None and rt.studio.feed is not None
    rt.studio.feed.attach()
    return rt


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Delete the broker tests' vhosts still being deleted or made ahead (tests/amqp/broker.py)."""
    broker = sys.modules.get("tests.amqp.broker")
    if broker is not None:
        broker.drain()


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def adapters() -> dict[str, Callable[[Path, ok.Clock | None], ok.Runtime]]:
    """The table ``runtime`` and ``virtual_runtime`` build from (``tests/contract`` adds
    its cross-host adapter)."""
    return ADAPTERS


@pytest.fixture
def runtime(
    adapter: str, adapters: dict[str, Callable[[Path, ok.Clock | None], ok.Runtime]], tmp_path: Path
) -> Iterator[ok.Runtime]:
    rt = adapters[adapter](tmp_path, None)
    try:
        yield rt
    finally:
        rt.stop()


@pytest.fixture
def virtual_runtime(
    adapter: str, adapters: dict[str, Callable[[Path, ok.Clock | None], ok.Runtime]], tmp_path: Path
) -> Iterator[tuple[ok.Runtime, ok.VirtualClock]]:
    clock = ok.VirtualClock()
    rt = adapters[adapter](tmp_path, clock)
    try:
        yield rt, clock
    finally:
        rt.stop()


@pytest.fixture
def hub(runtime: ok.Runtime) -> ok.EventHub:
    return runtime.hub


class Background:
    """Run a blocking call in a thread and collect its result or exception."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], object]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:  # handed to the test through .get()
            self.error = exc
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def get(self, timeout: float = 10.0) -> object:
        if not self._done.wait(timeout):
            pytest.fail(f"background call still running after {timeout}s")
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def background() -> Callable[[Callable[[], object]], Background]:
    return Background
