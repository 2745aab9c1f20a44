"""``AgentIO``: what a crew's agents reach outside the crew actor: the runtime's I/O
loop (:class:`~orkeon_actors.actors.io_loop.IoLoop`), where their model calls and async
tool calls run, and the runtime's journal of agent events
(:class:`~orkeon_actors.model.agent_events.AgentEventJournal`).

A :class:`~orkeon_actors.runtime.Runtime` makes one and :func:`attach` es it to its hub;
a crew finds it with :func:`agent_io_of` (its hub is the one thing every crew is built
with, by a supervisor or by ``CrewActor.start(rt.hub, ...)``). A crew on a hub no runtime
attached (a test building a hub by hand) shares a process-wide default, whose loop
thread starts at its first async call and is a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from typing import Any, Literal

from orkeon_actors.actors.io_loop import DEFAULT_BLOCKING_THREADS, IoLoop
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.agent_events import AgentEventJournal

__all__ = ["AgentIO", "CallKind", "agent_io_of", "attach", "call_kind", "detach"]

CallKind = Literal["inline", "async", "blocking", "timed"]
"""How a model's ``complete`` runs: on the crew's thread (``inline``), as a coroutine on
the I/O loop (``async``), on the loop's bounded executor (``blocking``), or on the
crew's thread with its answer delivered ``latency`` seconds later on the runtime's clock
(``timed``: a simulated model call, virtual time in a simulation)."""


def call_kind(model: Any) -> CallKind:
    """``async`` for a model whose ``complete`` is a coroutine function, ``blocking``
    for a synchronous one that declares ``blocking = True`` (it does I/O), ``timed`` for
    a synchronous one with a positive ``latency`` (seconds), else ``inline``."""
    if inspect.iscoroutinefunction(model.complete):
        return "async"
    if getattr(model, "blocking", False) is True:
        return "blocking"
    latency = getattr(model, "latency", 0.0)
    return "timed" if isinstance(latency, int | float) and latency > 0 else "inline"


class AgentIO:
    """A runtime's I/O loop and agent event journal, as its crews see them.

    ``max_blocking_threads``: the bound of the executor running blocking models (at most
    that many of their calls at once, the rest queue); set it before the first such call.
    ``max_concurrent_calls``: at most that many model calls of the runtime's crews in
    flight at once (``None``: unbounded); more wait for a slot on the loop, in order,
    none dropped; set it before the first call.
    """

    def __init__(
        self,
        journal: AgentEventJournal,
        *,
        name: str = "orkeon-io",
        max_blocking_threads: int = DEFAULT_BLOCKING_THREADS,
    ) -> None:
        self.journal = journal
        self.loop = IoLoop(name, max_blocking_threads=max_blocking_threads)
        self.max_concurrent_calls: int | None = None
        self.keyed_tool_calls = False
        """Whether crews run their agents' ``post_message``/``send_request`` calls with a
        key derived from the call (:mod:`~orkeon_actors.crew.replay_keys`): set by
        ``Runtime.start`` when its store keeps the sent history."""
        self._slots: asyncio.Semaphore | None = None

    def slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """What a call holds while it runs (on the loop): a slot of
        ``max_concurrent_calls``, or nothing when unbounded."""
        bound = self.max_concurrent_calls
        if bound is None:
            return contextlib.nullcontext()
        if self._slots is None:  # made on the loop's thread, the only one that calls this
            if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
                raise InvalidArgumentError(f"max_concurrent_calls must be a positive int or None, got {bound!r}")
            self._slots = asyncio.Semaphore(bound)
        return self._slots

    def stop(self) -> None:
        """Cancel the calls in flight and stop the loop (its runtime stops)."""
        self.loop.stop()


_attached: dict[int, AgentIO] = {}
_lock = threading.Lock()
_default: AgentIO | None = None


def attach(hub: object, io: AgentIO) -> None:
    """Make ``io`` what crews on ``hub`` use (until :func:`detach`)."""
    with _lock:
        _attached[id(hub)] = io


def detach(hub: object) -> None:
    """Forget ``hub``'s :class:`AgentIO` (its runtime stopped)."""
    with _lock:
        _attached.pop(id(hub), None)


def agent_io_of(hub: object) -> AgentIO:
    """The :class:`AgentIO` attached to ``hub``, else the process-wide default."""
    global _default
    io = _attached.get(id(hub))
    if io is not None:
        return io
    with _lock:
        if _default is None:
            _default = AgentIO(AgentEventJournal(), name="orkeon-io-default")
        return _default
