"""``SerialGate``: how a :class:`~orkeon_actors.sim.Simulation` makes a run deterministic.

Crews are pykka actors, each on its own thread. Left alone, two deliveries racing into one
crew (two workers' results reaching their manager, say) arrive in whichever order the
threads happen to run, and so may the crews' trace entries and results. In a simulation
every crew has this gate as its :class:`~orkeon_actors.crew.crew_actor.DeliveryGate`:

* every delivery to a crew (the start, a wait's outcome, mail taken from a mailbox, a
  bound event, a timer's timeout, an injected tool result) is *submitted* to the gate
  instead of being told to the crew;
* the simulation *releases* them one at a time, oldest submitted first, and waits until
  the receiving crew has handled the delivery (an ``ask``) before releasing the next; so
  at most one crew runs at any moment;
* the simulation's hub runs its mailboxes inline (no mailbox actor thread), so whatever
  handling a delivery causes (posts, publishes, replies, waits settled, hence further
  submissions) happens on that crew's thread, in program order, before the release
  returns; timers fire only when the simulation advances the virtual clock, which it
  does only once the gate is empty.

Hence the order of releases is virtual time first (the clock moves only between
quiescent states), then submission order, which is the causal order in which the one
running crew (or the clock's timers, in deadline order) produced the deliveries. Thread
timing never enters it: the same seed and crews give the same recorded trace and the
same results, run after run.

Outside a simulation no gate exists and crews are told directly: the only cost is one
``is None`` test per delivery.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pykka

from orkeon_actors.crew.crew_actor import Activity

__all__ = ["SerialGate", "SimulationStuckError"]


class SimulationStuckError(RuntimeError):
    """A crew did not finish handling a released delivery within the simulation's
    ``quiet_timeout`` (a policy or tool that blocks, or a deadlock in user code)."""


class SerialGate:
    """Holds the deliveries submitted by the crews of one simulation; releases them one
    at a time. ``submit`` is thread-safe; ``release_next`` is called by the simulation's
    thread only."""

    def __init__(self, activity: Activity | None = None, *, timeout: float = 30.0) -> None:
        self._lock = threading.Lock()
        self._held: deque[tuple[pykka.ActorRef[Any], Any]] = deque()
        self._activity = activity
        self._timeout = timeout
        self.submitted = 0
        """Deliveries submitted so far (a quiescence check compares it)."""
        self.released = 0

    def submit(self, ref: pykka.ActorRef[Any], message: Any) -> None:
        """Hold ``message`` for the actor ``ref`` until it is released."""
        with self._lock:
            self._held.append((ref, message))
            self.submitted += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def release_next(self) -> bool:
        """Deliver the oldest held message and return once its crew handled it; ``False``
        if nothing was held. A delivery to a stopped crew is dropped (as a tell to a dead
        actor is). Raises :class:`SimulationStuckError` if the crew does not finish
        handling it within the timeout."""
        with self._lock:
            if not self._held:
                return False
            ref, message = self._held.popleft()
            self.released += 1
        activity = self._activity
        if activity is not None:
            activity.begin()
        try:
            ref.ask(message, timeout=self._timeout)
        except pykka.ActorDeadError:
            if activity is not None:
                activity.end()
        except pykka.Timeout as exc:
            raise SimulationStuckError(
                f"a crew did not finish handling {type(message).__name__} within {self._timeout}s; "
                "a policy, tool or hook blocks (simulated crews must never block), or raise quiet_timeout"
            ) from exc
        return True

    def release_all(self) -> int:
        """Release until nothing is held (deliveries submitted meanwhile included);
        returns how many were released."""
        count = 0
        while self.release_next():
            count += 1
        return count
