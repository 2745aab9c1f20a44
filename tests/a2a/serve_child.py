"""The serving process of the restart test: ``orkeon a2a`` with the test crew's model
registered (``python -m tests.a2a.serve_child STORE CREW_FILE``; the token of the caller
``planner`` in ``ORKEON_A2A_TOKEN``)."""

from __future__ import annotations

import sys

import tests.a2a.serving  # noqa: F401  (registers the a2a-echo model provider)
from orkeon_actors.cli.main import main

if __name__ == "__main__":
    store, crew = sys.argv[1:3]
    sys.exit(main(["a2a", "--store", store, "--crew", crew, "--port", "0", "--caller", "planner"]))
