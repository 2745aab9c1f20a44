"""Simulations of crews with scripted agents on a virtual clock (see ``docs/crews.md``)."""

from orkeon_actors.crew.model import ScriptedModel, call, respond
from orkeon_actors.sim.gate import SerialGate, SimulationStuckError
from orkeon_actors.sim.simulation import Simulation, SimulationResult
from orkeon_actors.sim.trace import Trace, TraceEvent

__all__ = [
    "ScriptedModel",
    "SerialGate",
    "Simulation",
    "SimulationResult",
    "SimulationStuckError",
    "Trace",
    "TraceEvent",
    "call",
    "respond",
]
