"""Simulations of crews with scripted agents on a virtual clock, run by one seeded scheduler
(see ``docs/simulation.md``)."""

from orkeon_actors.crew.model import ScriptedModel, call, respond
from orkeon_actors.sim.faults import Faults, SimulatedModelError
from orkeon_actors.sim.scheduler import DeterministicScheduler, SimulationStuckError
from orkeon_actors.sim.simulation import Simulation, SimulationResult
from orkeon_actors.sim.trace import Trace, TraceEvent

__all__ = [
    "DeterministicScheduler",
    "Faults",
    "ScriptedModel",
    "SimulatedModelError",
    "Simulation",
    "SimulationResult",
    "SimulationStuckError",
    "Trace",
    "TraceEvent",
    "call",
    "respond",
]
