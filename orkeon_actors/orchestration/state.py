"""The modes' progress as data lives with the crew (:mod:`orkeon_actors.crew.mode_state`:
a snapshot holds it, and the crew never imports the modes); this module keeps its names
importable from here."""

from orkeon_actors.crew.mode_state import *  # noqa: F403  (the same names, re-exported)
from orkeon_actors.crew.mode_state import __all__ as __all__
