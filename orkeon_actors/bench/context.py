"""What a benchmark run shares with its suites: where temporary stores go, and progress.

Suites create their scratch stores with :func:`scratch_directory` (under the system temp
directory, or the ``--dir`` of ``orkeon bench``; never the current directory) and report
where they are with :func:`progress` (``"round 2/7"``). The command shows progress on a
terminal; elsewhere (pipes, CI logs, tests) nothing is reported unless a reporter is set.
A suite that takes loguru over (``logger.remove()``, to measure logging or to run at
INFO) gives it back with :func:`restore_logging`, never with loguru's default handler
(everything at DEBUG on stderr, which would print into the command's output).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["boot_crews", "progress", "restore_logging", "running", "scratch_directory"]

_directory: str | None = None
_reporter: Callable[[str], None] | None = None
_boot_crews: int | None = None
_log_level: str | None = None


def restore_logging() -> None:
    """Give loguru back after a suite removed its handlers: the runtime's records go to
    stderr at the level of the running ``orkeon bench`` (``WARNING``, ``DEBUG`` with
    ``-v``); outside a run with a level, nowhere."""
    if _log_level is not None:
        from orkeon_actors.logs import enable_logging

        enable_logging(_log_level, lambda line: sys.stderr.write(line))


def boot_crews(default: int) -> int:
    """The sleeping crews of the lifecycle bench's boot store: ``--boot-crews``, else
    ``default``."""
    return default if _boot_crews is None else _boot_crews


def scratch_directory(prefix: str) -> str:
    """A new temporary directory for one suite's stores (the caller removes it)."""
    return tempfile.mkdtemp(prefix=prefix, dir=_directory)


def progress(text: str) -> None:
    """Report where the running suite is (a round, a step); a no-op without a reporter."""
    if _reporter is not None:
        _reporter(text)


@contextmanager
def running(
    directory: str | os.PathLike[str] | None,
    reporter: Callable[[str], None] | None,
    *,
    boot: int | None = None,
    log_level: str | None = None,
) -> Iterator[None]:
    """Run suites with scratch stores under ``directory`` (``None``: the system temp
    directory), progress sent to ``reporter`` and ``boot`` sleeping crews in the
    lifecycle bench's boot store (``None``: its default); ``log_level`` is where
    :func:`restore_logging` sends the runtime's records (``None``: nowhere). Raises
    ``InvalidArgumentError`` for a directory that does not exist or a ``boot`` below 1."""
    global _directory, _reporter, _boot_crews, _log_level
    if directory is not None and not os.path.isdir(directory):
        from orkeon_actors.errors import InvalidArgumentError

        raise InvalidArgumentError(f"--dir {os.fspath(directory)!r} is not a directory: create it or choose another")
    if boot is not None and boot < 1:
        from orkeon_actors.errors import InvalidArgumentError

        raise InvalidArgumentError(f"--boot-crews {boot}: give at least 1 crew")
    previous = _directory, _reporter, _boot_crews, _log_level
    _directory = None if directory is None else os.fspath(directory)
    _reporter = reporter
    _boot_crews = boot
    _log_level = log_level
    try:
        yield
    finally:
        _directory, _reporter, _boot_crews, _log_level = previous
