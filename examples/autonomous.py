"""The autonomous orchestration mode: run it and print its timeline.

    python examples/autonomous.py

The crew itself is ``orkeon_actors.sim.examples.build_autonomous``: scripted agents on a
virtual clock, so it runs in well under a second whatever the waits it contains.
"""

from orkeon_actors.sim.cli import run_simulate


def main() -> int:
    """Run the autonomous example and print its timeline; 0 when the crew completed."""
    return run_simulate("autonomous")


if __name__ == "__main__":
    raise SystemExit(main())
