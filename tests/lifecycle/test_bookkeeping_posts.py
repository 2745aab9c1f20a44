"""Issue #21's bound (spec §11.2, §11.4; docs/lifecycle.md "Bookkeeping that does not
grow"): a crew that loops on ``receive_message`` through many posts and sleeps keeps
the same bookkeeping in the store (rows, bytes, pages) after its first sleep as after
its last, and every post is processed exactly once, in order, also when its process is
SIGKILLed mid-run and restarted. The full-size run (1,000,000 posts) is
``orkeon bench lifecycle --posts``."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from orkeon_actors.bench.bookkeeping import Tally, run_posts
from orkeon_actors.cli.main import main

from .children import tagged

CHILD = Path(__file__).with_name("posts_child.py")


@pytest.mark.timeout(600)  # ≈ 7 s of CPU; a minute or more on a loaded 2-core machine (setup.cfg's 120 s is per test)
def test_five_thousand_posts_across_ten_sleeps_keep_the_bookkeeping_of_the_first(tmp_path: Path) -> None:
    # 500 posts between sleeps: a row or a few bytes kept per post would show as rows or
    # as new 4 KiB pages between the first sample and the last (4,500 posts later)
    run = run_posts(5_000, every=500, samples=10, directory=str(tmp_path))
    assert run.tally == Tally(5_000, 4_999, 0)  # every post given once, in order
    assert [s.posts for s in run.samples] == list(range(500, 5_001, 500))
    kept = {(s.processed_rows, s.mark_rows, s.mark_bytes, s.kept_posts, s.bookkeeping_pages) for s in run.samples}
    # no processed_messages row, one mark, nothing kept: the same after 500 posts as after 5,000
    assert kept == {(0, 1, run.samples[0].mark_bytes, 0, run.samples[0].bookkeeping_pages)}
    sizes = [s.snapshot_bytes for s in run.samples]
    assert max(sizes) - min(sizes) <= 32  # the bounded conversation: only the tally's digits grow


def _killed_at(db: Path, start: int, total: int, every: int, at: int) -> None:
    """Run the child from ``start``; SIGKILL it once it reported post ``at`` posted."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(start), str(total), str(every)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    try:
        for line in child.stdout:
            if line.strip() == f"POSTED {at}":
                child.send_signal(signal.SIGKILL)
                break
        else:
            raise AssertionError(f"the child ended before post {at}: {child.wait()} {child.stderr.read()[-3000:]}")
    finally:
        child.stdout.close()
        assert child.wait(timeout=60) == -signal.SIGKILL
        child.stderr.close()


def test_posts_are_processed_once_in_order_across_sigkills_mid_run(tmp_path: Path) -> None:
    db, total, every = tmp_path / "posts.db", 300, 25
    rng = random.Random(21)
    frontier = 0
    for at in sorted(rng.sample(range(1, total - 1), 4)):
        # killed while posting, processing or sleeping: posts up to ``at`` were committed;
        # later ones may have been, and are not sent again (idempotency keys)
        _killed_at(db, frontier, total, every, at)
        frontier = at + 1
    done = subprocess.run(
        [sys.executable, str(CHILD), str(db), str(frontier), str(total), str(every)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    # restored from its last snapshot each time, given what that snapshot did not
    # reflect: every post once, in order
    assert tagged(lines, "RESULT") == [total, total - 1, 0]
    assert tagged(lines, "STATE") == {"processed": 0, "marks": 1, "kept": 0}


def test_the_tally_sees_a_post_given_twice() -> None:
    """The check above can fail: a repeated or skipped post is counted out of order."""
    tally = Tally()
    for post in (0, 1, 1, 2, 4):
        tally = tally.given(post)
    assert attrs.astuple(tally) == (5, 4, 2)
    assert json.loads(tally.text()[6:]) == {"count": 5, "last": 4, "out_of_order": 2}


def test_orkeon_bench_lifecycle_posts_prints_each_sample_and_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "lifecycle", "--posts", "300", "--json", "--dir", str(tmp_path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    *samples, figures = lines
    assert [s["posts"] for s in samples][-1] == 300 and len(samples) >= 2  # a sleep every 3 posts
    assert {(s["processed_rows"], s["mark_rows"], s["kept_posts"]) for s in samples} == {(0, 1, 0)}
    assert figures["posts"] == 300 and figures["posts_per_sleep"] == 3 and figures["bookkeeping_constant"] is True


@pytest.mark.parametrize("argv", [["lifecycle", "--posts", "0"], ["hub", "--posts", "10"]])
def test_orkeon_bench_posts_outside_the_lifecycle_suite_or_below_one_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", *argv])
    assert exited.value.code == 2
