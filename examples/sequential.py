"""The sequential orchestration mode: run it and print its timeline.

    python examples/sequential.py

The crew itself is ``orkeon_actors.sim.examples.build_sequential``: scripted agents on a
virtual clock, so it runs in well under a second whatever the waits it contains.
"""

from orkeon_actors.sim.examples import run_example


def main() -> int:
    sim, crew = run_example("sequential")
    try:
        print(sim.trace.timeline())
        status, result, failure = sim.result().crews[crew]
        print(f"\n{crew}: {status.value}  result={result!r}" + (f"  failure={failure}" if failure else ""))
        return 0 if failure is None else 1
    finally:
        sim.stop()


if __name__ == "__main__":
    raise SystemExit(main())
