"""``DeterministicScheduler``: the one thread, seeded, that runs a simulation.

A :class:`~orkeon_actors.sim.Simulation` installs it as the actor executor
(:func:`~orkeon_actors.actors.executor.executor_scope`) before it starts its runtime, so
that, through the actor runtime's own seam and nothing else:

* every turn of every crew and mailbox actor started in the simulation is *submitted* here
  instead of to a pool thread (mailboxes are caller-runs actors: in a simulation their
  turns are submitted too, ``lets_callers_run`` is ``False``);
* every timer of the runtime's scheduler (a finite wait's expiry, a send's timeout, a
  budget deadline) that comes due on the virtual clock is submitted here as a task;
* an ``ask`` made on the simulation's thread (``query_crew``, ``ref.stop()``) gets a
  :class:`DrivenFuture`, which runs tasks until it is answered.

:meth:`DeterministicScheduler.step` runs one ready task, chosen among all the ready ones
by a :class:`random.Random` seeded with the simulation's seed. Ready tasks are those
submitted and not yet run: at one virtual instant, the deliveries that are ready race
exactly as they would on threads, and the seed decides who wins. What the order can never
break: an actor has at most one turn ready at a time and its inbox is FIFO, so messages
from one sender to one actor are handled in order (spec §10.4), and one actor never runs
twice at once. The clock moves only when nothing is ready (the simulation advances it to
the next timer), so virtual time never runs backwards along the trace.

Hence the schedule is a function of the seed and the program alone: no thread timing,
no ``hash()`` order, no wall clock. Same seed, same schedule, byte for byte; another seed,
possibly another interleaving.

The scheduler is meant for one driving thread (the simulation's). ``submit`` takes a lock
so that a turn submitted from elsewhere (an actor bound to it, told by a foreign thread)
is not lost, but such a submission's position depends on that thread's timing: keep
everything of a simulation on its thread.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pykka

from orkeon_actors.actors.executor import current_executor

__all__ = ["DeterministicScheduler", "DrivenFuture", "SimulationStuckError", "task_owner"]

T = TypeVar("T")

Task = Callable[[], None]
Interceptor = Callable[[Task], bool]
"""Called with the chosen task before it runs; ``True``: the interceptor took it (a fault
delays it, say) and the scheduler does not run it now."""


class SimulationStuckError(RuntimeError):
    """Something on the simulation's thread waited for an answer (an ``ask``) that no
    task left to run can give: a deadlock in user code, or an actor of the simulation
    told from another thread."""


def task_owner(task: Task) -> object | None:
    """The actor whose turn ``task`` is (a bound method of a pykka actor), or ``None``
    (a timer, a plain function)."""
    owner = getattr(task, "__self__", None)
    return owner if isinstance(owner, pykka.Actor) else None


class DeterministicScheduler:
    """A seeded, single-threaded actor executor (module docstring).

    ``steps`` counts the tasks run so far; ``interceptor`` (if set) sees each chosen task
    first and may take it (fault injection); ``on_step`` (if set) is called after each."""

    lets_callers_run = False

    def __init__(self, seed: int) -> None:
        self.seed = seed
        # A string seed is hashed with SHA-512 by ``random``: stable across processes.
        self._rng = random.Random(f"orkeon-schedule:{seed}")
        self._lock = threading.Lock()
        self._ready: list[Task] = []
        self.steps = 0
        self.interceptor: Interceptor | None = None
        self.on_step: Callable[[], None] | None = None
        self.when_idle: Callable[[], bool] | None = None
        """Called by :meth:`run_until` when no task is ready: ``True`` if it made some
        ready (the simulation moves its clock to the next timer)."""

    # -- the TurnExecutor protocol ------------------------------------------------------

    def submit(self, task: Task) -> None:
        with self._lock:
            self._ready.append(task)

    def create_future(self) -> pykka.Future[Any]:
        return DrivenFuture(self)

    # -- driving ----------------------------------------------------------------------

    @property
    def ready(self) -> int:
        """Tasks ready to run."""
        with self._lock:
            return len(self._ready)

    def step(self) -> bool:
        """Run one ready task, chosen by the seed; ``False`` if none was ready."""
        with self._lock:
            ready = self._ready
            if not ready:
                return False
            task = ready.pop(self._rng.randrange(len(ready)) if len(ready) > 1 else 0)
        self.steps += 1
        interceptor = self.interceptor
        if interceptor is None or not interceptor(task):
            task()
        if self.on_step is not None:
            self.on_step()
        return True

    def run_until(self, done: Callable[[], bool]) -> bool:
        """Run tasks until ``done()`` holds (``True``) or none is ready and
        ``when_idle`` makes none ready (``False``)."""
        while not done():
            if not self.step():
                when_idle = self.when_idle
                if when_idle is None or not when_idle():
                    return done()
        return True

    def run_ready(self) -> int:
        """Run until no task is ready (tasks submitted meanwhile included); returns how
        many ran."""
        count = 0
        while self.step():
            count += 1
        return count


class DrivenFuture(pykka.ThreadingFuture[T]):
    """The future of an ``ask`` made in a simulation: ``get`` runs the scheduler's tasks
    until the answer is set, rather than blocking the thread that must produce it. If no
    task is left and there is still no answer, ``get`` raises :class:`SimulationStuckError`
    at once (whatever its ``timeout``: nothing else runs the simulation). A future with
    a get hook (pykka's ``stop`` builds one) defers to its hook."""

    def __init__(self, scheduler: DeterministicScheduler | None = None) -> None:
        super().__init__()
        if scheduler is None:
            executor = current_executor()
            scheduler = executor if isinstance(executor, DeterministicScheduler) else None
        self._scheduler = scheduler
        self._answered = False
        self._hooked = False

    def set(self, value: Any | None = None) -> None:
        self._answered = True
        super().set(value)

    def set_exception(self, exc_info: Any = None) -> None:
        self._answered = True
        super().set_exception(exc_info)

    def set_get_hook(self, func: Any) -> None:
        self._hooked = True
        super().set_get_hook(func)

    def get(self, *, timeout: float | None = None) -> Any:
        scheduler = self._scheduler
        if scheduler is not None and not self._hooked and not self._answered:
            if not scheduler.run_until(lambda: self._answered):
                raise SimulationStuckError(
                    "an ask on the simulation's thread can never be answered: no task is left to run "
                    "(an actor waits for itself, or is told from another thread)"
                )
        return super().get(timeout=timeout)
