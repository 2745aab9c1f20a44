"""The contract between a crew actor and its orchestration mode lives with the crew
(:mod:`orkeon_actors.crew.mode`), so that the crew never imports the modes; this module
keeps its names importable from here."""

from orkeon_actors.crew.mode import PARKED, Orchestration, OrchestrationError

__all__ = ["PARKED", "Orchestration", "OrchestrationError"]
