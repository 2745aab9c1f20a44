"""The six orchestration modes (spec §8.2). Each mode's progress is an
``OrchestrationState`` variant from :mod:`orkeon_actors.crew.orchestration_state`."""

from orkeon_actors.crew.orchestration import PARKED, Orchestration, OrchestrationError
from orkeon_actors.orchestration.autonomous import Autonomous
from orkeon_actors.orchestration.consensual import Consensual
from orkeon_actors.orchestration.graph import END, Condition, Edge, Graph, GraphCycleLimitError
from orkeon_actors.orchestration.hierarchical import Hierarchical
from orkeon_actors.orchestration.parallel import AGGREGATIONS, Branch, Parallel
from orkeon_actors.orchestration.sequential import Sequential, Task

__all__ = [
    "AGGREGATIONS",
    "END",
    "PARKED",
    "Autonomous",
    "Branch",
    "Condition",
    "Consensual",
    "Edge",
    "Graph",
    "GraphCycleLimitError",
    "Hierarchical",
    "Orchestration",
    "OrchestrationError",
    "Parallel",
    "Sequential",
    "Task",
]
