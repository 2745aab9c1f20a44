"""A process SIGKILLed while it holds a lease on a durable mailbox loses nothing: the
restarted store holds the leased message first, then the others, in order
(docs/hub.md "Leases")."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("lease_child.py")


def test_a_lease_held_at_sigkill_leaves_the_message_first_in_its_mailbox(tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    holder = subprocess.Popen(
        [sys.executable, str(CHILD), db, "--hold"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line == "LEASED first\n", holder.stderr.read() if holder.stderr else line
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    assert holder.returncode == -signal.SIGKILL
    after = subprocess.run([sys.executable, str(CHILD), db, "--drain"], capture_output=True, text=True, timeout=60)
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == ["HELD first", "HELD second", "HELD third"]
