"""``orkeon bench lifecycle --soak SECONDS``: the supervisor under churn, one line per
sample (see :mod:`orkeon_actors.bench.soak`)."""

from __future__ import annotations

import json
import sys

import attrs
from loguru import logger

from orkeon_actors.bench.context import running
from orkeon_actors.bench.soak import SoakSample, run_soak

__all__ = ["run_soak_command"]

_SHOWN = ("entries", "outcomes", "live", "status", "in_flight", "patterns", "idle_touched", "expiries_held")
_ROWS = ("processed_messages", "mailbox_marks", "cursor_events", "asleep_snapshots", "failed_snapshots")


def _line(sample: SoakSample) -> str:
    maps = " ".join(f"{k}={sample.maps.get(k, 0)}" for k in _SHOWN)
    hub = " ".join(f"{k[4:]}={v}" for k, v in sample.maps.items() if k.startswith("hub_"))
    rows = " ".join(f"{k}={sample.rows.get(k, 0)}" for k in _ROWS)
    return f"{sample.at:8.1f}s finished={sample.finished:<7} rss={sample.rss_mb:7.1f}MB | {maps} | hub {hub} | {rows}"


def run_soak_command(seconds: float, *, as_json: bool, directory: str | None) -> int:
    """Run the soak for ``seconds``, printing each sample as it is taken (a JSON object
    per line with ``--json``), then the growth between the second and the last sample."""
    every = max(1.0, seconds / 30)

    def report(sample: SoakSample) -> None:
        print(json.dumps(attrs.asdict(sample)) if as_json else _line(sample), flush=True)

    logger.remove()  # the failer crews log a warning each: keep errors only
    logger.add(sys.stderr, level="ERROR")
    with running(directory, None):
        samples = run_soak(seconds, every=every, report=report)
    if not as_json and len(samples) > 2:
        first, last = samples[1], samples[-1]
        grown = {k: last.maps[k] - first.maps.get(k, 0) for k in last.maps if last.maps[k] != first.maps.get(k, 0)}
        print(
            f"from {first.at:.0f}s to {last.at:.0f}s: {last.finished - first.finished} crews finished, "
            f"RSS {last.rss_mb - first.rss_mb:+.1f} MB, maps changed: {grown or 'none'}"
        )
    return 0
