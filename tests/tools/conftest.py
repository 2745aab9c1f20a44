"""Fixtures of the agent-tool tests.

Every runtime here runs on a :class:`~orkeon_actors.VirtualClock`: a timeout expires
only when a test advances the clock, so no test depends on real time. A blocking tool
call runs in a :class:`Call` thread; the test waits, with a deadline, until the hub has
registered the call's wait (``hub.pending_waits()``) before acting on it.

The world: crew ``billing`` with agents ``scorer`` (``tools``) and ``clerk``
(``clerk``), and crew ``fraud`` with agent ``checker`` (``outsider``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest

import orkeon_actors as ok
from orkeon_actors.testing import wait_until
from orkeon_actors.tools import EventHubTools
from orkeon_actors.tools.definitions import spec_for

ENVELOPE_FIELDS = frozenset(
    {
        "id",
        "topic",
        "source_crew_id",
        "source_agent_id",
        "target_crew_id",
        "target_mailbox",
        "correlation_id",
        "published_at",
        "metadata",
        "payload",
        "schema_id",
    }
)
"""Every field of the §6.1 envelope."""


class Call:
    """Run a blocking call in a thread; ``get()`` returns its result or re-raises."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._result: Any = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._result = fn()
        except BaseException as exc:  # handed to the test by get()
            self._error = exc
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def get(self, timeout: float = 10.0) -> Any:
        if not self._done.wait(timeout):
            pytest.fail(f"the call was still blocked after {timeout}s")
        if self._error is not None:
            raise self._error
        return self._result


def wait_registered(rt: ok.Runtime, kind: str, count: int = 1) -> None:
    """Block until exactly ``count`` waits of ``kind`` are registered in the hub."""
    wait_until(lambda: rt.hub.pending_waits()[kind] == count, what=f"{count} {kind} wait(s)")


def check_result(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """Assert ``result`` is what tool ``name`` promises: its output schema, JSON-safe."""
    spec = spec_for(name)
    assert spec is not None
    jsonschema.Draft202012Validator(spec.output_schema, format_checker=jsonschema.FormatChecker()).validate(result)
    return result


@pytest.fixture
def clock() -> ok.VirtualClock:
    return ok.VirtualClock()


@pytest.fixture
def rt(clock: ok.VirtualClock) -> Iterator[ok.Runtime]:
    runtime = ok.Runtime.start(clock=clock)
    try:
        yield runtime
    finally:
        runtime.stop()


def _tools(rt: ok.Runtime, crew: str, agent: str) -> Iterator[EventHubTools]:
    tools = EventHubTools(rt.hub.bind(crew, agent))
    try:
        yield tools
    finally:
        tools.close()


@pytest.fixture
def tools(rt: ok.Runtime) -> Iterator[EventHubTools]:
    """The tools of agent ``scorer`` of crew ``billing``."""
    yield from _tools(rt, "billing", "scorer")


@pytest.fixture
def clerk(rt: ok.Runtime) -> Iterator[EventHubTools]:
    """The tools of agent ``clerk``, same crew as ``tools``."""
    yield from _tools(rt, "billing", "clerk")


@pytest.fixture
def outsider(rt: ok.Runtime) -> Iterator[EventHubTools]:
    """The tools of agent ``checker`` of another crew, ``fraud``."""
    yield from _tools(rt, "fraud", "checker")
