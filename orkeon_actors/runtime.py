"""The bootstrap: one place that wires clock, scheduler, middleware and hub together.

``Runtime.start()`` boots the actors; ``stop()`` (or leaving the ``with`` block) stops
every actor and thread it started, and blocked callers get ``HubStoppedError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

from orkeon_actors.hub.memory import InMemoryEventHub
from orkeon_actors.hub.port import EventHub
from orkeon_actors.hub.scheduler import Scheduler
from orkeon_actors.middleware.pipeline import EventHubMiddleware, Pipeline
from orkeon_actors.model.clock import Clock, SystemClock

__all__ = ["Runtime"]


class Runtime:
    """A running hub and its supporting actors.

    ``hub`` is the :class:`~orkeon_actors.hub.port.EventHub`; ``clock`` the time source
    (pass a :class:`~orkeon_actors.model.clock.VirtualClock` to drive time yourself).
    """

    def __init__(self, hub: EventHub, scheduler: Scheduler, clock: Clock) -> None:
        self.hub = hub
        self.scheduler = scheduler
        self.clock = clock
        self._stopped = False

    @classmethod
    def start(
        cls,
        *,
        middleware: Sequence[EventHubMiddleware] = (),
        clock: Clock | None = None,
    ) -> Runtime:
        """Boot an in-memory runtime.

        ``middleware`` stages run in registration order on the publish path and in
        reverse on the receive path (spec §12).
        """
        clock = clock or SystemClock()
        scheduler = Scheduler(clock)
        hub = InMemoryEventHub(clock, scheduler, Pipeline(middleware))
        return cls(hub, scheduler, clock)

    def stop(self) -> None:
        """Stop the hub and the scheduler; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.hub.stop()
        self.scheduler.stop()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
