"""``orkeon bench``: figures measured, never asserted (ARCHITECTURE §8).

Every suite reports its figures beside a baseline measured in the same run (raw pykka
``tell``/``ask``, raw apsw, ...) and the ratio between them. Keys are stable and
documented in ``docs/bench.md``.
"""

from orkeon_actors.bench.registry import SUITES, BenchResult, run_suites

__all__ = ["SUITES", "BenchResult", "run_suites"]
