"""``orkeon bench lifecycle --posts N``: one crew through ``N`` posts across many sleeps,
its bookkeeping sampled (see :mod:`orkeon_actors.bench.bookkeeping`)."""

from __future__ import annotations

import json
import sys

import attrs
from loguru import logger

from orkeon_actors.bench.bookkeeping import Sample, run_posts, summary
from orkeon_actors.bench.context import running

__all__ = ["run_posts_command"]


def _line(sample: Sample) -> str:
    return (
        f"{sample.posts:>10,} posts {sample.seconds:8.1f}s | processed_messages={sample.processed_rows} "
        f"mailbox_marks={sample.mark_rows} ({sample.mark_bytes} B) kept={sample.kept_posts} "
        f"bookkeeping_pages={sample.bookkeeping_pages} | mailbox_pages={sample.mailbox_pages} "
        f"snapshot={sample.snapshot_bytes} B db={sample.db_bytes:,} B free_pages={sample.free_pages}"
    )


def run_posts_command(posts: int, *, as_json: bool, directory: str | None) -> int:
    """Run ``posts`` posts through one crew, printing each sample as it is taken (a JSON
    object per line with ``--json``), then the summary; 1 if the bookkeeping changed."""

    def report(sample: Sample) -> None:
        print(json.dumps(attrs.asdict(sample)) if as_json else _line(sample), flush=True)

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    with running(directory, None):
        run = run_posts(posts, report=report, timeout=3600)
    figures = summary(run)
    print(json.dumps(figures) if as_json else " ".join(f"{k}={v}" for k, v in figures.items()))
    return 0 if figures["bookkeeping_constant"] else 1
