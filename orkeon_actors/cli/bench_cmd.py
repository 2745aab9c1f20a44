"""``orkeon bench``: run suites, show progress on a terminal, mark missed targets."""

from __future__ import annotations

import sys
from typing import TextIO

from orkeon_actors.bench.context import running
from orkeon_actors.bench.registry import missed_targets, render_table, run_suites, to_json

__all__ = ["run_bench"]


class _TerminalProgress:
    """One status line on stderr, rewritten in place ("orkeon bench: suite hub (1/2) round 3/7")."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._suite = ""
        self._shown = False

    def __call__(self, text: str) -> None:
        if text.startswith("suite "):
            self._suite, line = text, text
        else:
            line = f"{self._suite}: {text}" if self._suite else text
        self._stream.write(f"\r\033[Korkeon bench: {line}")
        self._stream.flush()
        self._shown = True

    def done(self) -> None:
        if self._shown:
            self._stream.write("\r\033[K")
            self._stream.flush()


def run_bench(
    suites: list[str],
    *,
    quick: bool,
    as_json: bool,
    check: bool,
    directory: str | None,
    boot_crews: int | None = None,
    verbose: bool = False,
) -> int:
    """Run ``suites`` and print their figures; 1 with ``check`` when a target was missed.
    The runtime's log records go to stderr at WARNING (DEBUG with ``verbose``), as the
    command set them, also after a suite that measured logging: never into the figures."""
    reporter = _TerminalProgress(sys.stderr) if sys.stderr.isatty() else None
    try:
        with running(directory, reporter, boot=boot_crews, log_level="DEBUG" if verbose else "WARNING"):
            results = run_suites(suites, quick=quick)
    finally:
        if reporter is not None:
            reporter.done()
    print(to_json(results) if as_json else render_table(results))
    missed = missed_targets(results)
    if missed and not as_json:
        names = ", ".join(missed)
        print(f"\n✗ {len(missed)} figure(s) missed their target: {names} (figures are noisy on a busy machine)")
    return 1 if check and missed else 0
