"""The orchestration modes (spec §8.2). Each mode's progress is an ``OrchestrationState``
variant from :mod:`orkeon_actors.orchestration.state`."""

from orkeon_actors.orchestration.base import PARKED, Orchestration, OrchestrationError
from orkeon_actors.orchestration.sequential import Sequential, Task

__all__ = ["PARKED", "Orchestration", "OrchestrationError", "Sequential", "Task"]
