"""Running the lifecycle's child-process scripts (``*_child.py``) for the crash tests:
each prints tagged lines (``TAG json``) and is SIGKILLed by itself at the step under
test, or exits normally."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["run_child", "tagged"]


def run_child(script: Path, *args: str, killed: bool = False) -> list[str]:
    """Run ``script`` with ``args``; assert it was SIGKILLed (``killed``) or exited 0
    (the child's stderr in the failure message); return its stdout lines."""
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == (-signal.SIGKILL if killed else 0), done.stderr[-3000:]
    return done.stdout.splitlines()


def tagged(lines: list[str], tag: str) -> Any:
    """The JSON of the one line tagged ``tag``."""
    [line] = [line.split(" ", 1)[1] for line in lines if line.startswith(tag + " ")]
    return json.loads(line)
