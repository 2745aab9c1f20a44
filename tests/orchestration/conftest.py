"""The orchestration tests use the crew tests' fixtures: one runtime on a virtual clock
and a crew launcher."""

from tests.crew.conftest import Crews, Launcher, Recorder, crews

__all__ = ["Crews", "Launcher", "Recorder", "crews"]
