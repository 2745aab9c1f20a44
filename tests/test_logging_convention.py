"""orkeon_actors is silent until the application enables its logs; the stdlib bridge
routes them through ``logging``. Each case runs a fresh interpreter (the tests' own
session enables the library's logs in conftest)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

REOPEN = textwrap.dedent(
    """
    import sys, tempfile, pathlib
    import orkeon_actors as ok
    if sys.argv[1] == "enabled":
        ok.enable_logging("DEBUG")
    db = pathlib.Path(tempfile.mkdtemp()) / "s.db"
    for _ in range(2):
        with ok.Runtime.start(store=db) as rt:
            rt.hub.register_mailbox("agent://c/a")
            rt.hub.bind("c", "a").post("agent://c/a", 1)
    """
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_the_library_logs_nothing_by_default() -> None:
    done = _run("-c", REOPEN, "default")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""


def test_enable_logging_shows_the_runtimes_records_once() -> None:
    done = _run("-c", REOPEN, "enabled")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "reopened with" in line]
    assert len(lines) == 1, done.stderr  # once: loguru's default handler does not print it again
    assert "orkeon_actors.store.mailbox_store" in lines[0] and "DEBUG" in lines[0]
    # one timestamp format everywhere a person reads one: RFC 3339, UTC, with Z
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \| DEBUG ", lines[0]), lines[0]


def test_the_cli_logs_with_rfc3339_timestamps_with_v_after_the_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orkeon_actors.cli", "demo", "-v", "--store", str(tmp_path / "d.db")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "| DEBUG " in line]
    assert lines, done.stderr
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \| DEBUG ", line) for line in lines), lines[:3]


def test_the_stdlib_logging_bridge_example() -> None:
    done = _run(str(ROOT / "examples" / "logging_bridge.py"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "INFO app: received {'order': 42}",  # the DEBUG reopen line was below the stdlib level
        "DEBUG orkeon_actors.store.mailbox_store: mailbox agent://billing/scorer reopened with 1 kept message(s)",
    ]
