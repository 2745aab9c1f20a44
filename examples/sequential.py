"""The sequential orchestration mode: run it and print its timeline.

    python examples/sequential.py

The crew itself is ``orkeon_actors.sim.examples.build_sequential``: scripted agents on a
virtual clock, so it runs in well under a second whatever the waits it contains.
"""

from orkeon_actors.sim.cli import run_simulate


def main() -> int:
    """Run the sequential example and print its timeline; 0 when the crew completed."""
    return run_simulate("sequential")


if __name__ == "__main__":
    raise SystemExit(main())
